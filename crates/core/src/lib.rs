//! The toolgate engine: a tool call's pipeline, one module per station, plus the turn scheduler and timers.
//! No JS here: a host (the Node binding, or a test) drives `Engine` and runs the handlers.

pub mod artifacts;
pub mod bounded;
pub mod breaker;
pub mod budget;
pub mod cache;
pub mod calls;
pub mod checks;
pub mod command;
pub mod dedup;
pub mod definitions;
pub mod engine;
pub mod fence;
pub mod gemini_schema;
pub mod invoke;
pub mod json;
pub mod judge;
pub mod lookup;
pub mod metrics;
pub mod normalize;
pub mod panic;
pub mod options;
pub mod parse;
pub mod permission;
pub mod ratelimit;
pub mod redact;
pub mod repair;
pub mod registry;
pub mod result;
pub mod retry;
pub mod scheduler;
pub mod schema_cost;
pub mod shape;
pub mod shared;
pub mod store;
pub mod text;
pub mod timer;
pub mod validate;

pub use engine::{Alarm, Engine, HostAnswer, HostKind, HostRequest, Shaped, Shaping, Start, Step};
pub use normalize::Outcome;
pub use options::{EngineOptions, RetryPolicy, ToolSpec, TurnOptions};
pub use permission::Policy;
pub use definitions::DefinitionFormat;
pub use result::{ErrorKind, ToolResult};
