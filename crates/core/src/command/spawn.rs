//! Starting a command in a session of its own, with the environment and input its call gave it.

use super::*;

#[cfg(unix)]
pub(super) fn spawn(inv: &Invocation) -> std::io::Result<tokio::process::Child> {
    use std::process::Stdio;
    let mut command = match (&inv.argv, &inv.shell) {
        (_, Some(shell)) => {
            let mut c = tokio::process::Command::new("/bin/sh");
            c.arg("-c").arg(shell);
            c
        }
        (Some(argv), _) => {
            let mut c = tokio::process::Command::new(&argv[0]);
            c.args(&argv[1..]);
            c
        }
        _ => unreachable!("Invocation::from_json requires argv or shell"),
    };
    command.env_clear().envs(&inv.env);
    if let Some(cwd) = &inv.cwd {
        command.current_dir(cwd);
    }
    command.stdin(if inv.stdin.is_some() { Stdio::piped() } else { Stdio::null() });
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    // SAFETY: setsid is async-signal-safe, and nothing else runs between fork and exec. A session of its own
    // holds everything the command starts (only setsid leaves it), whatever process groups it makes, and keeps the
    // terminal's signals (Ctrl-C to the server) from reaching it unasked.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    command.spawn()
}

#[cfg(not(unix))]
pub(super) fn spawn(_inv: &Invocation) -> std::io::Result<tokio::process::Child> {
    Err(std::io::Error::new(std::io::ErrorKind::Unsupported, "command tools run only on Unix"))
}
