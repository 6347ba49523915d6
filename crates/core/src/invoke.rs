//! Station 9: the handler runs under a total deadline and an idle deadline. The handler itself runs in the host
//! (JS); this module decides what a call that did not settle in time, or was cancelled, tells the model.

use crate::tool::ToolInfo;
use crate::result::{ErrorKind, ToolResult};

/// What a call stopped part-way tells the model about its effect and what to do next.
fn advice(tool: &impl ToolInfo) -> &'static str {
    if tool.read_only() {
        "It only reads, so nothing changed: retry with a narrower request (fewer items, a smaller range, a simpler query)."
    } else {
        "It can change state and was stopped part-way, so its effect is unknown: check whether it took effect before retrying."
    }
}

pub fn timed_out(call_id: String, tool: &impl ToolInfo) -> ToolResult {
    let name = tool.name();
    let error = format!("Tool \"{name}\" did not finish within its time limit of {} ms and was stopped. {}", tool.timeout_ms(), advice(tool));
    ToolResult::failure(call_id, name.to_string(), ErrorKind::Timeout, error, tool.timeout_retryable())
}

pub fn idle_timed_out(call_id: String, tool: &impl ToolInfo, idle_ms: u64) -> ToolResult {
    let name = tool.name();
    let error = format!("Tool \"{name}\" reported no progress for {idle_ms} ms (its idle limit) and was stopped. {}", advice(tool));
    ToolResult::failure(call_id, name.to_string(), ErrorKind::IdleTimeout, error, tool.timeout_retryable())
}

/// The turn's own deadline passed while this call ran.
pub fn turn_deadline_hit(call_id: String, tool: &impl ToolInfo, deadline_ms: u64) -> ToolResult {
    let name = tool.name();
    let error = format!("Tool \"{name}\" was stopped when the turn's deadline of {deadline_ms} ms passed. {}", advice(tool));
    ToolResult::failure(call_id, name.to_string(), ErrorKind::Timeout, error, tool.timeout_retryable())
}

/// A call a turn policy kept from starting; `why` completes "was not run: …".
pub fn not_executed(call_id: String, tool_name: &str, why: &str) -> ToolResult {
    let error = format!("Tool \"{tool_name}\" was not run: {why}.");
    ToolResult::failure(call_id, tool_name.to_string(), ErrorKind::NotExecuted, error, true)
}

/// The turn was cancelled (`reason` says by whom or why) before or while this call ran.
pub fn cancelled(call_id: String, tool: &impl ToolInfo, was_running: bool, reason: &str) -> ToolResult {
    let name = tool.name();
    let error = if !was_running {
        format!("Tool \"{name}\" was not run: the turn was cancelled before it started ({reason}).")
    } else if tool.read_only() {
        format!("Tool \"{name}\" was stopped while running: the turn was cancelled ({reason}). It only reads, so nothing changed.")
    } else {
        format!(
            "Tool \"{name}\" was stopped while running: the turn was cancelled ({reason}). \
             It can change state, so its effect is unknown: check whether it took effect before retrying."
        )
    };
    let retryable = !was_running || tool.read_only();
    ToolResult::failure(call_id, name.to_string(), ErrorKind::Cancelled, error, retryable)
}
