//! An engine whose every call the pass makes is shown to the watchdog's
//! pinger ([`crate::host::systemd::Progress`]) with the call's own time
//! limit: a pass that waits out long stop grace periods is alive, a pass
//! stuck past its calls' limits is not. Pulls (tasks of their own, not the
//! pass) and the event stream pass through unmarked.

use std::sync::Arc;

use crate::engine::docker::limits;
use crate::engine::{Engine, EngineError, Image, Life, Observed};
use crate::host::systemd::Progress;
use crate::model::spec::ContainerSpec;

/// An engine whose calls mark the loop's progress.
#[derive(Clone)]
pub struct Watched<E> {
    /// The engine.
    pub engine: E,
    /// The loop's progress.
    pub progress: Arc<Progress>,
}

impl<E: Engine> Engine for Watched<E> {
    fn flavour(&self) -> crate::engine::Flavour {
        self.engine.flavour()
    }
    fn data_root(&self) -> Option<std::path::PathBuf> {
        self.engine.data_root()
    }
    fn engine_version(&self) -> String {
        self.engine.engine_version()
    }

    async fn ping(&self) -> Result<(), EngineError> {
        let _call = self.progress.call(limits::QUICK);
        self.engine.ping().await
    }
    async fn list_containers(&self) -> Result<Vec<Observed>, EngineError> {
        let _call = self.progress.call(limits::QUICK);
        self.engine.list_containers().await
    }
    async fn list_images(&self) -> Result<Vec<Image>, EngineError> {
        let _call = self.progress.call(limits::QUICK);
        self.engine.list_images().await
    }
    async fn inspect(&self, id: &str) -> Result<Life, EngineError> {
        let _call = self.progress.call(limits::QUICK);
        self.engine.inspect(id).await
    }
    async fn pull(
        &self,
        reference: &str,
        auth: Option<crate::engine::PullAuth>,
    ) -> Result<(), EngineError> {
        self.engine.pull(reference, auth).await
    }
    async fn image_root(&self, name: &str) -> Result<(String, Vec<String>), EngineError> {
        self.engine.image_root(name).await
    }
    async fn export(&self, id: &str) -> Result<hyper::body::Incoming, EngineError> {
        self.engine.export(id).await
    }
    async fn load(
        &self,
        archive: crate::engine::socket::Channel,
    ) -> Result<Vec<String>, EngineError> {
        self.engine.load(archive).await
    }
    async fn tag(&self, id: &str, repo: &str, tag: &str) -> Result<(), EngineError> {
        self.engine.tag(id, repo, tag).await
    }
    async fn create(&self, spec: &ContainerSpec) -> Result<String, EngineError> {
        // A create that cannot join a network removes what it made.
        let _call = self.progress.call(limits::ACT + limits::STOP);
        self.engine.create(spec).await
    }
    async fn start(&self, id: &str) -> Result<(), EngineError> {
        let _call = self.progress.call(limits::ACT);
        self.engine.start(id).await
    }
    async fn watch(
        &self,
        node: &str,
        since_ns: i64,
        on_event: impl Fn(crate::engine::ContainerEvent) + Send + Sync + 'static,
    ) -> EngineError {
        self.engine.watch(node, since_ns, on_event).await
    }
    async fn stop(&self, id: &str) -> Result<(), EngineError> {
        let _call = self.progress.call(limits::STOP);
        self.engine.stop(id).await
    }
    async fn logs(&self, id: &str, range: crate::engine::LogRange) -> Result<Vec<u8>, EngineError> {
        let _call = self.progress.call(limits::ACT);
        self.engine.logs(id, range).await
    }
    async fn signal(&self, id: &str, signal: &str) -> Result<(), EngineError> {
        let _call = self.progress.call(limits::ACT);
        self.engine.signal(id, signal).await
    }
    async fn rename(&self, id: &str, name: &str) -> Result<(), EngineError> {
        let _call = self.progress.call(limits::ACT);
        self.engine.rename(id, name).await
    }
    async fn remove(&self, id: &str) -> Result<(), EngineError> {
        let _call = self.progress.call(limits::STOP);
        self.engine.remove(id).await
    }
    async fn remove_image(&self, name: &str) -> Result<(), EngineError> {
        let _call = self.progress.call(limits::ACT);
        self.engine.remove_image(name).await
    }
}
