//! Station 9: the handler runs under a total deadline. The handler itself runs in the host (JS); this module
//! decides what a call that did not settle in time, or was cancelled, tells the model.

use crate::registry::Tool;
use crate::result::{ErrorKind, ToolResult};

pub fn timed_out(call_id: String, tool: &Tool) -> ToolResult {
    let name = &tool.spec.name;
    let limit = tool.timeout_ms;
    let (advice, retryable) = if tool.spec.read_only {
        ("It only reads, so nothing changed: retry with a narrower request (fewer items, a smaller range, a simpler query).", true)
    } else {
        ("It can change state and was stopped part-way, so its effect is unknown: check whether it took effect before retrying.", false)
    };
    let error = format!("Tool \"{name}\" did not finish within its time limit of {limit} ms and was stopped. {advice}");
    ToolResult::failure(call_id, name.clone(), ErrorKind::Timeout, error, retryable)
}

/// The turn was cancelled (`reason` says by whom or why) before or while this call ran.
pub fn cancelled(call_id: String, tool: &Tool, was_running: bool, reason: &str) -> ToolResult {
    let name = &tool.spec.name;
    let error = if !was_running {
        format!("Tool \"{name}\" was not run: the turn was cancelled before it started ({reason}).")
    } else if tool.spec.read_only {
        format!("Tool \"{name}\" was stopped while running: the turn was cancelled ({reason}). It only reads, so nothing changed.")
    } else {
        format!(
            "Tool \"{name}\" was stopped while running: the turn was cancelled ({reason}). \
             It can change state, so its effect is unknown: check whether it took effect before retrying."
        )
    };
    let retryable = !was_running || tool.spec.read_only;
    ToolResult::failure(call_id, name.clone(), ErrorKind::Cancelled, error, retryable)
}
