//! Whether a call may be sent again after an attempt that may have been applied (the contract's
//! rule `RETRY-UNSAFE`), and the idempotency key that makes it safe to.

use candor_schema::Failure;

/// A call's idempotency key: `candor-` and 32 lowercase hexadecimal digits, new for each call.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct IdempotencyKey([u8; IdempotencyKey::LEN]);

impl IdempotencyKey {
    const LEN: usize = 39;

    /// A new key, unique to the call.
    pub(super) fn new() -> Self {
        let mut key = [0u8; Self::LEN];
        // A generated id is `candor-` and two 16-digit hex numbers: always `LEN` ASCII bytes
        // (the adapter's tests check its form), so the lengths match.
        key.copy_from_slice(crate::classify::http::generated_operation_id().as_bytes());
        Self(key)
    }

    /// The key as the header carries it.
    pub fn as_str(&self) -> &str {
        // Made of ASCII only (`new`): always valid UTF-8.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

impl std::fmt::Debug for IdempotencyKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What precedes the message of a failure that may have been applied, of a call not safe to
/// repeat (rule `RETRY-UNSAFE`).
pub const NOT_SENT_AGAIN: &str = "the request may have been applied, so it was not sent again: ";

/// Makes `failure` not retryable when it may have been applied (rule `RETRY-UNSAFE`), for a call
/// that is not safe to repeat.
pub(super) fn not_sent_again(failure: &mut Failure) {
    if failure.retryable && crate::retry::may_have_been_applied(failure) {
        failure.retryable = false;
        failure.message.insert_str(0, NOT_SENT_AGAIN);
    }
}

/// Whether RFC 9110 (section 9.2.2) defines `method` as idempotent.
pub(super) fn is_idempotent_method(method: &http::Method) -> bool {
    use http::Method;
    [
        Method::GET,
        Method::HEAD,
        Method::OPTIONS,
        Method::TRACE,
        Method::PUT,
        Method::DELETE,
    ]
    .contains(method)
}
