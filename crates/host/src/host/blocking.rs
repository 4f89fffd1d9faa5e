//! Running blocking work (file I/O, hashing, the store's fsyncs) on tokio's
//! blocking threads, so the async threads (the API, the watcher, signals)
//! are never held up by it. One spawn for every kind of work: the closure
//! is boxed, so the task machinery is compiled once, not once per caller.

use tokio::sync::oneshot;

/// Runs `f` on a blocking thread and waits for its result. A panic in `f`
/// is a panic here.
pub async fn run<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = oneshot::channel();
    let job: Box<dyn FnOnce() + Send> = Box::new(move || {
        let _ = tx.send(f());
    });
    if let Err(e) = tokio::task::spawn_blocking(job).await {
        std::panic::resume_unwind(e.into_panic());
    }
    rx.await.expect("a finished job has sent its result")
}

/// Starts `f` on a blocking thread without waiting for it.
pub fn detach(f: impl FnOnce() + Send + 'static) {
    let job: Box<dyn FnOnce() + Send> = Box::new(f);
    drop(tokio::task::spawn_blocking(job));
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn the_result_comes_back_from_another_thread() {
        let here = std::thread::current().id();
        let there = super::run(|| std::thread::current().id()).await;
        assert_ne!(here, there);
        assert_eq!(super::run(|| 6 * 7).await, 42);
    }
}
