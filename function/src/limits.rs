//! What one RunFunction call may cost, and the call's deadline.
//!
//! Every call runs on a thread of its own ([`run_bounded`]) whose stack is large enough for any input the
//! bounds here accept, so deep input cannot overflow it. The thread carries the call's [`Deadline`]; long loops
//! (placing replicas, evaluating CEL) ask [`check_deadline`] and give up with a FATAL once the caller has gone or
//! the time is up, so an abandoned call stops working rather than holding a core.

use std::{
    cell::RefCell,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use crate::error::ComposeError;

/// Crossplane's gRPC client accepts responses up to 4 MiB (grpc-go's default receive limit).
pub const MAX_RESPONSE_BYTES: usize = 4 * 1024 * 1024;

/// Most replicas of one ModelDeployment (the XRD's maximum): the scheduler's memory is linear in it.
pub const MAX_REPLICAS: u32 = 1000;

/// The longest a call may take. Crossplane v2 sets no deadline of its own per call: a call may take what is left of
/// the composite's two-minute reconcile, during which that reconcile worker waits. The server answers (or stops)
/// every call by this time, so a slow function holds each of Crossplane's workers for seconds, not minutes.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest FATAL message. Crossplane copies it into an event and a condition message (Kubernetes truncates event
/// messages at 1 KiB and condition messages at 32 KiB); past a few KiB a message helps nobody.
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024;

/// Stack for the thread a call runs on. Accepted CEL needs far less (its nesting is bounded before parsing and its
/// depth after), as do the decoders (which are iterative); the margin covers parsing a maximal expression of the
/// worst shape the bounds still admit, measured in the `cel` tests.
pub const CALL_STACK_BYTES: usize = 256 * 1024 * 1024;

/// When a call must stop: the caller's deadline, or the caller going away.
#[derive(Debug, Clone)]
pub struct Deadline {
    at: Instant,
    cancelled: Arc<AtomicBool>,
}

impl Deadline {
    /// A deadline `timeout` from now, never later than [`CALL_TIMEOUT`].
    pub fn after(timeout: Duration) -> Self {
        Self {
            at: Instant::now() + timeout.min(CALL_TIMEOUT),
            cancelled: Arc::new(AtomicBool::new(false)),
        }
    }

    /// A handle that cancels this call when dropped without [`Cancel::disarm`]: the server holds it in the
    /// request's future, which tonic drops when the client goes away or its `grpc-timeout` passes.
    pub fn cancel_on_drop(&self) -> Cancel {
        Cancel {
            cancelled: Some(self.cancelled.clone()),
        }
    }

    fn expired(&self) -> Option<&'static str> {
        if self.cancelled.load(Ordering::Relaxed) {
            Some("the caller cancelled the call")
        } else if Instant::now() >= self.at {
            Some("the call ran past its deadline")
        } else {
            None
        }
    }
}

impl Default for Deadline {
    fn default() -> Self {
        Self::after(CALL_TIMEOUT)
    }
}

/// Cancels a call's [`Deadline`] when dropped.
#[derive(Debug)]
pub struct Cancel {
    cancelled: Option<Arc<AtomicBool>>,
}

impl Cancel {
    /// The call finished: dropping this no longer cancels anything.
    pub fn disarm(mut self) {
        self.cancelled = None;
    }
}

impl Drop for Cancel {
    fn drop(&mut self) {
        if let Some(cancelled) = &self.cancelled {
            cancelled.store(true, Ordering::Relaxed);
        }
    }
}

thread_local! {
    static DEADLINE: RefCell<Option<Deadline>> = const { RefCell::new(None) };
}

/// Fails once this thread's call has expired. Loops over user-sized input call it every iteration.
pub fn check_deadline() -> Result<(), ComposeError> {
    let expired = DEADLINE.with(|d| d.borrow().as_ref().and_then(Deadline::expired));
    match expired {
        Some(why) => Err(ComposeError::new(
            "",
            format!(
                "{why}; composing stopped after at most {}s (simplify the composite, e.g. fewer replicas or \
                 simpler CEL selectors)",
                CALL_TIMEOUT.as_secs()
            ),
        )),
        None => Ok(()),
    }
}

/// Runs `work` on this thread under `deadline`. The thread must have [`CALL_STACK_BYTES`] of stack (the server's
/// compose pool does).
pub fn run_here<T>(deadline: Deadline, work: impl FnOnce() -> T) -> T {
    DEADLINE.with(|d| *d.borrow_mut() = Some(deadline));
    let out = work();
    // The thread composes other calls next: their deadline is not this one.
    DEADLINE.with(|d| *d.borrow_mut() = None);
    out
}

/// Runs `work` on a fresh thread with [`CALL_STACK_BYTES`] of stack, under `deadline`. `None` only when the
/// thread could not be started or died, which the caller reports as an internal error.
pub fn run_bounded<T: Send + 'static>(
    deadline: Deadline,
    work: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    // The caller's span (the request's tag) carries over, so the call's events still name their request.
    let span = tracing::Span::current();
    let thread = std::thread::Builder::new()
        .name("run-function".into())
        .stack_size(CALL_STACK_BYTES)
        .spawn(move || {
            let _entered = span.enter();
            DEADLINE.with(|d| *d.borrow_mut() = Some(deadline));
            work()
        })
        .ok()?;
    thread.join().ok()
}

/// Cuts `message` to at most [`MAX_MESSAGE_BYTES`] on a character boundary, saying how much was cut.
pub fn bound_message(message: String) -> String {
    if message.len() <= MAX_MESSAGE_BYTES {
        return message;
    }
    let cut = message.len() - MAX_MESSAGE_BYTES;
    let mut end = MAX_MESSAGE_BYTES;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({cut} more bytes cut)", &message[..end])
}

/// Cuts text a user controls (or that echoes their values) to `max` bytes on a character boundary.
pub fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

/// Quotes user input in a message, cut to `max` characters: names and values a user typed are echoed back, but
/// never at any length.
pub fn quote(value: &str, max: usize) -> String {
    match value.char_indices().nth(max) {
        None => format!("{value:?}"),
        Some((end, _)) => format!("{:?}... ({} bytes)", &value[..end], value.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_are_cut_on_a_character_boundary() {
        let message = "é".repeat(MAX_MESSAGE_BYTES);
        let cut = bound_message(message);
        assert!(cut.len() < MAX_MESSAGE_BYTES + 64, "{}", cut.len());
        assert!(cut.ends_with(&format!("({} more bytes cut)", MAX_MESSAGE_BYTES)));
        assert_eq!(bound_message("short".into()), "short");
    }

    #[test]
    fn quoted_values_are_cut() {
        assert_eq!(quote("abc", 8), "\"abc\"");
        assert_eq!(quote(&"x".repeat(100), 3), "\"xxx\"... (100 bytes)");
    }

    #[test]
    fn an_expired_or_cancelled_call_stops() {
        let expired = run_bounded(Deadline::after(Duration::ZERO), check_deadline).unwrap();
        assert!(expired.unwrap_err().reason.contains("past its deadline"));
        let deadline = Deadline::after(Duration::from_secs(5));
        drop(deadline.cancel_on_drop());
        let cancelled = run_bounded(deadline, check_deadline).unwrap();
        assert!(cancelled.unwrap_err().reason.contains("cancelled"));
        let fine = Deadline::after(Duration::from_secs(5));
        fine.cancel_on_drop().disarm();
        assert_eq!(run_bounded(fine, check_deadline).unwrap(), Ok(()));
        // Outside a bounded call there is no deadline.
        assert_eq!(check_deadline(), Ok(()));
    }
}
