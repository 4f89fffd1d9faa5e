//! An engine whose every call is counted into the metrics: how a quiet pass
//! is shown to cost two engine calls.

use crate::engine::{Engine, EngineError, Image, Life, Observed};
use crate::model::spec::ContainerSpec;
use crate::status::metrics::Metrics;

/// An engine whose calls are counted.
#[derive(Clone)]
pub struct Counted<E> {
    /// The engine.
    pub engine: E,
    /// Where the counts go.
    pub metrics: std::sync::Arc<Metrics>,
}

impl<E: Engine> Engine for Counted<E> {
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
        self.metrics.call("ping");
        self.engine.ping().await
    }
    async fn list_containers(&self) -> Result<Vec<Observed>, EngineError> {
        self.metrics.call("list_containers");
        self.engine.list_containers().await
    }
    async fn list_images(&self) -> Result<Vec<Image>, EngineError> {
        self.metrics.call("list_images");
        self.engine.list_images().await
    }
    async fn inspect(&self, id: &str) -> Result<Life, EngineError> {
        self.metrics.call("inspect");
        self.engine.inspect(id).await
    }
    async fn pull(
        &self,
        reference: &str,
        auth: Option<crate::engine::PullAuth>,
    ) -> Result<(), EngineError> {
        self.metrics.call("pull");
        self.engine.pull(reference, auth).await
    }
    async fn image_root(&self, name: &str) -> Result<(String, Vec<String>), EngineError> {
        self.metrics.call("image_root");
        self.engine.image_root(name).await
    }
    async fn export(&self, id: &str) -> Result<hyper::body::Incoming, EngineError> {
        self.metrics.call("export");
        self.engine.export(id).await
    }
    async fn load(
        &self,
        archive: crate::engine::socket::Channel,
    ) -> Result<Vec<String>, EngineError> {
        self.metrics.call("load");
        self.engine.load(archive).await
    }
    async fn tag(&self, id: &str, repo: &str, tag: &str) -> Result<(), EngineError> {
        self.metrics.call("tag");
        self.engine.tag(id, repo, tag).await
    }
    async fn create(&self, spec: &ContainerSpec) -> Result<String, EngineError> {
        self.metrics.call("create");
        self.engine.create(spec).await
    }
    async fn start(&self, id: &str) -> Result<(), EngineError> {
        self.metrics.call("start");
        self.engine.start(id).await
    }
    async fn watch(
        &self,
        node: &str,
        since_ns: i64,
        on_event: impl Fn(crate::engine::ContainerEvent) + Send + Sync + 'static,
    ) -> EngineError {
        self.metrics.call("events");
        self.engine.watch(node, since_ns, on_event).await
    }
    async fn stop(&self, id: &str) -> Result<(), EngineError> {
        self.metrics.call("stop");
        self.engine.stop(id).await
    }
    async fn logs(&self, id: &str, range: crate::engine::LogRange) -> Result<Vec<u8>, EngineError> {
        self.metrics.call("logs");
        self.engine.logs(id, range).await
    }
    async fn signal(&self, id: &str, signal: &str) -> Result<(), EngineError> {
        self.metrics.call("signal");
        self.engine.signal(id, signal).await
    }
    async fn rename(&self, id: &str, name: &str) -> Result<(), EngineError> {
        self.metrics.call("rename");
        self.engine.rename(id, name).await
    }
    async fn remove(&self, id: &str) -> Result<(), EngineError> {
        self.metrics.call("remove");
        self.engine.remove(id).await
    }
    async fn remove_image(&self, name: &str) -> Result<(), EngineError> {
        self.metrics.call("remove_image");
        self.engine.remove_image(name).await
    }
}
