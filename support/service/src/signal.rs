//! The shutdown signal.

use std::future::Future;

/// A future that resolves when the process is asked to stop: Ctrl-C (SIGINT) or, on Unix,
/// SIGTERM (what Kubernetes and `docker stop` send).
///
/// SIGTERM is listened for from this call on, not from the first poll, so a SIGTERM that arrives
/// while the service is still starting is not lost. When it cannot be listened for, that is
/// logged (`error`) and only Ctrl-C stops the process.
///
/// # Panics
///
/// Outside a Tokio runtime, as [`tokio::signal::unix::signal`] does.
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    let terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
    async move {
        let interrupt = tokio::signal::ctrl_c();
        #[cfg(unix)]
        {
            let mut terminate = match terminate {
                Ok(signal) => signal,
                Err(err) => {
                    tracing::error!(
                        error = %err,
                        "cannot listen for SIGTERM; only Ctrl-C stops this process"
                    );
                    let _ = interrupt.await;
                    return;
                }
            };
            tokio::select! {
                _ = interrupt => {}
                _ = terminate.recv() => {}
            }
        }
        #[cfg(not(unix))]
        let _ = interrupt.await;
    }
}
