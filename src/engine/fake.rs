//! A fake engine for unit tests of the reconciler's logic (backoff on a
//! paused clock, a quiet pass's writes): containers in memory, every action
//! recorded with its time. Never the only proof that a feature works: the
//! engine tests run the same paths against the real Docker Engine.

use std::sync::{Arc, Mutex};

use crate::engine::{ContainerState, Engine, EngineError, Image, Life, Observed};
use crate::model::labels::Labels;
use crate::model::names::Digest;
use crate::model::spec::ContainerSpec;

/// A fake engine; its clones share its state.
#[derive(Default, Clone)]
pub struct Fake {
    /// Its containers.
    pub containers: Arc<Mutex<Vec<Observed>>>,
    /// Every action (`create`, `start`, `pull`, `refused`) and when.
    pub actions: Arc<Mutex<Vec<(String, tokio::time::Instant)>>>,
    /// Containers stay up instead of dying at once.
    pub healthy: bool,
    /// The engine refuses every create.
    pub refuse_create: bool,
    /// A refused create quotes the env it was given, as the engine's
    /// runtime does of a value it cannot set.
    pub quote_env: bool,
}

impl Fake {
    fn act(&self, what: &str) {
        self.actions
            .lock()
            .unwrap()
            .push((what.into(), tokio::time::Instant::now()));
    }

    /// Changes the container `id`, if there is one.
    fn with(&self, id: &str, f: impl Fn(&mut Observed)) {
        for c in self
            .containers
            .lock()
            .unwrap()
            .iter_mut()
            .filter(|c| c.id == id)
        {
            f(c);
        }
    }

    /// When each action of `kind` happened, in seconds from `t0`.
    pub fn times(&self, kind: &str, t0: tokio::time::Instant) -> Vec<u64> {
        self.actions
            .lock()
            .unwrap()
            .iter()
            .filter(|(a, _)| a == kind)
            .map(|(_, t)| (*t - t0).as_secs())
            .collect()
    }
}

/// The one image the fake has: `img:1`.
pub fn image_id() -> Digest {
    Digest::of(b"img")
}

impl Engine for Fake {
    fn flavour(&self) -> crate::engine::Flavour {
        crate::engine::Flavour::Docker
    }
    fn data_root(&self) -> Option<std::path::PathBuf> {
        None
    }
    fn engine_version(&self) -> String {
        "28.0.0".into()
    }
    async fn ping(&self) -> Result<(), EngineError> {
        Ok(())
    }
    async fn list_containers(&self) -> Result<Vec<Observed>, EngineError> {
        Ok(self.containers.lock().unwrap().clone())
    }
    async fn list_images(&self) -> Result<Vec<Image>, EngineError> {
        Ok(vec![Image {
            id: image_id().to_string(),
            tags: vec!["img:1".into()],
            digests: vec![],
            size: 1 << 20,
            created: 0,
        }])
    }
    async fn inspect(&self, _: &str) -> Result<Life, EngineError> {
        Ok(Life {
            restart_count: 0,
            started_ns: 0,
            finished_ns: 0,
            exit_code: 1,
            restarting: false,
            health_output: None,
        })
    }
    async fn pull(&self, _: &str, _: Option<crate::engine::PullAuth>) -> Result<(), EngineError> {
        self.act("pull");
        Err(EngineError::NotFound(
            "no such image in any registry".into(),
        ))
    }
    async fn image_root(&self, name: &str) -> Result<(String, Vec<String>), EngineError> {
        Err(EngineError::NotFound(format!("no such image: {name}")))
    }
    async fn load(&self, _: crate::engine::socket::Channel) -> Result<Vec<String>, EngineError> {
        self.act("load");
        Err(EngineError::Refused {
            status: 400,
            message: "the fake engine loads nothing".into(),
        })
    }
    async fn export(&self, name: &str) -> Result<hyper::body::Incoming, EngineError> {
        self.act("export");
        Err(EngineError::NotFound(format!(
            "the fake engine holds no layers: {name}"
        )))
    }
    async fn tag(&self, _: &str, _: &str, _: &str) -> Result<(), EngineError> {
        self.act("tag");
        Ok(())
    }
    async fn create(&self, spec: &ContainerSpec) -> Result<String, EngineError> {
        if self.refuse_create {
            self.act("refused");
            let env: Vec<String> = spec.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
            return Err(EngineError::Refused {
                status: 400,
                message: match self.quote_env {
                    false => "port is already allocated".into(),
                    true => format!("invalid env: {}", env.join(" ")),
                },
            });
        }
        self.act("create");
        let id = format!("c{}", self.actions.lock().unwrap().len());
        self.containers.lock().unwrap().push(Observed {
            id: id.clone(),
            names: vec![spec.name.clone()],
            labels: Labels::parse(&spec.labels),
            state: ContainerState::Created,
            status: "Created".into(),
            image_id: spec.image_id.clone(),
            created: 0,
            mount_sources: vec![],
        });
        Ok(id)
    }
    async fn start(&self, id: &str) -> Result<(), EngineError> {
        self.act("start");
        // Unless healthy, it dies at once, though its policy would have it
        // running.
        let healthy = self.healthy;
        self.with(id, |c| {
            if healthy {
                c.state = ContainerState::Running;
                c.status = "Up About an hour".into();
            } else {
                c.state = ContainerState::Exited;
                c.status = "Exited (1) Less than a second ago".into();
            }
        });
        Ok(())
    }
    async fn watch(
        &self,
        _: &str,
        _: i64,
        _: impl Fn(crate::engine::ContainerEvent) + Send + Sync + 'static,
    ) -> EngineError {
        std::future::pending().await
    }
    async fn stop(&self, id: &str) -> Result<(), EngineError> {
        self.act("stop");
        self.with(id, |c| {
            c.state = ContainerState::Exited;
            c.status = "Exited (0) Less than a second ago".into();
        });
        Ok(())
    }
    async fn logs(&self, id: &str, _: super::LogRange) -> Result<Vec<u8>, EngineError> {
        self.act("logs");
        Ok(format!("the logs of {id}\n").into_bytes())
    }
    async fn signal(&self, _: &str, _: &str) -> Result<(), EngineError> {
        self.act("signal");
        Ok(())
    }
    async fn rename(&self, id: &str, name: &str) -> Result<(), EngineError> {
        self.act("rename");
        self.with(id, |c| c.names = vec![name.to_string()]);
        Ok(())
    }
    async fn remove(&self, id: &str) -> Result<(), EngineError> {
        self.containers.lock().unwrap().retain(|c| c.id != id);
        Ok(())
    }
    async fn remove_image(&self, _: &str) -> Result<(), EngineError> {
        self.act("remove_image");
        Ok(())
    }
}
