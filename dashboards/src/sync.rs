//! The one lock helper every part of the dashboards takes its shared state with.

use std::sync::{Mutex, MutexGuard};

/// Locks a mutex; a panic in another holder leaves data that is still the best there is.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
