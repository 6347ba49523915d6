//! What crosses between the engine and its host: the step it answers with, the handlers it starts, the requests
//! only the host can answer, and the host's answers.


use serde_json::Value;

use crate::breaker::Transition;
use crate::result::ErrorKind;
use crate::ops::Op;
use crate::json;


include!("../generated/engine.rs");

impl HostAnswer {
    pub fn from_json(json: &str) -> Result<Self, String> {
        json::from_str_mended(json).map(|(answer, _)| answer).map_err(|e| format!("answer: not a host answer: {e}"))
    }
}

impl Step {
    /// The wire form: empty string when there is nothing to do, so the host can skip parsing.
    pub fn to_wire(&self) -> String {
        if self.is_empty() {
            String::new()
        } else {
            serde_json::to_string(self).expect("a step serializes")
        }
    }
}
