//! The context's plain fields, which keys (budgets, rate limits, caches, sessions, artifacts) are made of.

/// The context's plain fields (`sessionId`, `userId`, `tenantId`, …) that keys are made of, by name. The names are
/// the application's, so a fast hasher is safe here; stations look them up on every call.
pub type Fields = rustc_hash::FxHashMap<String, String>;
