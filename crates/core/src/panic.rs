//! A bug in the engine (a panic) while it handles one call's data costs that call, never the process: a panic that
//! crossed into Node would abort it, and one on a shaping thread would leave its call without an answer.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Runs `f`; a panic inside it comes back as its message.
pub fn contained<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| message(payload.as_ref()))
}

fn message(payload: &(dyn Any + Send)) -> String {
    match (payload.downcast_ref::<&str>(), payload.downcast_ref::<String>()) {
        (Some(text), _) => (*text).to_string(),
        (_, Some(text)) => text.clone(),
        _ => "a panic without a message".into(),
    }
}

/// What a call's result says when the engine failed on it.
pub fn internal_error(what: &str, bug: &str) -> String {
    format!("toolgate failed while {what} (an internal error: {bug}). This is a bug in toolgate, not in the call; report it.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_its_message() {
        assert_eq!(contained(|| 2 + 2), Ok(4));
        assert_eq!(contained(|| -> u32 { panic!("static text") }), Err("static text".into()));
        let n = 7;
        assert_eq!(contained(|| -> u32 { panic!("formatted {n}") }), Err("formatted 7".into()));
        assert_eq!(contained(|| -> u32 { std::panic::panic_any(5_u8) }), Err("a panic without a message".into()));
    }
}
