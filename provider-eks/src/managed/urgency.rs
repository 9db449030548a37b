//! Whether the reconcile running in a task is urgent (anything but a steady-state poll), for the AWS rate limiter
//! (`eks::throttle`) to let urgent calls go first. The reconciler decides it; the limiter only reads it, so the
//! reconciler needs nothing of the AWS side.

tokio::task_local! {
    static URGENT: bool;
}

/// Runs `work` with the calls it makes marked urgent or not.
pub async fn with_urgency<F: std::future::Future>(urgent: bool, work: F) -> F::Output {
    URGENT.scope(urgent, work).await
}

/// Whether the reconcile running in this task is urgent. Calls made outside a reconcile (tests, tools) are,
/// so they are never held back.
pub fn is_urgent() -> bool {
    URGENT.try_with(|u| *u).unwrap_or(true)
}
