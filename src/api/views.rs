//! The API's wire formats as types, shared by whoever writes or reads
//! them: the agent serialises them (`GET /v1/status`, `GET /v1/plane`,
//! `POST /v1/plane/sync`, the report PUT to the plane), the CLI
//! deserialises them and prints from their fields.

#[cfg(test)]
mod fixtures;

#[cfg(test)]
mod tests {
    use super::fixtures;
    use crate::plane::sync::Outcome;
    use crate::store::plane::Refusal;
    use serde_json::Value as J;
    use std::time::Duration;

    // The wire formats as 0.5.0 (a6753d2) wrote them for the fixtures,
    // compact and with the version as `@VERSION@`: not one byte may move.
    const NODES: [&str; 2] = [
        r#"{"engine":{"error":"gone","since":100,"state":"waiting"},"failing":{"error":"refused","since":150},"id":"edge-1","last_pass":{"at":200,"duration_ms":1500.2499999999998},"next_pass_at":230,"other_agent":"another agent","passes":3,"passing":false,"quarantine":{"document":{"cause":"panicked at 6","crashes":6,"digest":"sha256:139d544b821b13ebea14f1b0fe18577222e415c2966e3a3511c4196055232202","since":1006},"everything":{"cause":"panicked at 5","crashes":5,"since":1005},"modules":[{"cause":"panicked at 3","crashes":3,"module":"web","since":1003}],"revision":{"cause":"panicked at 4","crashes":4,"revision":7,"since":1004},"summary":"every module (no pass runs), plane revision 7, module web, plane document sha256:139d544b821b"},"version":"@VERSION@"}"#,
        r#"{"engine":{"state":"reachable"},"failing":null,"id":"edge-1","last_pass":{"at":300,"duration_ms":2.0},"next_pass_at":330,"other_agent":null,"passes":1,"passing":true,"quarantine":null,"version":"@VERSION@"}"#,
    ];
    const MODULES: [&str; 2] = [
        r#"{"container_id":null,"desired_digest":null,"health":null,"health_output":null,"image_id":null,"inputs_differ":[],"last_action":null,"last_error":null,"name":"db","next_attempt_at":null,"restart_count":null,"running_digest":null,"state":"pending"}"#,
        r#"{"container_id":"c0ffee","desired_digest":"sha256:b60b935389f7cf68e7877a80a4ded0dfc93e248b8807932536e1de0f771d259b","health":"unhealthy","health_output":"probe said no","image_id":"sha256:1mage","inputs_differ":[{"desired":null,"input":"env","running":"sha256:ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb"}],"last_action":{"action":"recreated","at":1700000050},"last_error":"it keeps restarting","name":"web","next_attempt_at":1700000900,"restart_count":4,"running_digest":"sha256:c071cf5f5ed6f884cc70155b6f05f755fd46a302d05e4261b7e92ce878bbfed8","state":"crash-looping"}"#,
    ];
    const PLANES: [&str; 3] = [
        r#"{"clock":"behind","configured":true,"conflicts":[{"error":"a file owns it","module":"db"}],"error":"HTTP 503","held":{"accepted_at":1700000100,"expired":true,"expires":1700086400,"floor":false,"issued_at":1700000000,"key_id":"ed25519:abc","revision":9,"revoked":"no key trusted now signed it"},"last_contact":1700000200,"next_poll_at":1700000500,"plane_date":1700000201,"refusal":{"at":1700000150,"class":"rollback","detail":"revision 8 is older","revision":8},"reports":{"error":"PUT: HTTP 500","last_sent_at":1700000300,"last_seq":42,"pending":true,"url":"http://plane/nodes/edge-1/status.json"},"url":"http://plane/nodes/edge-1/desired.json"}"#,
        r#"{"clock":null,"configured":true,"conflicts":[],"error":null,"held":null,"last_contact":null,"next_poll_at":null,"plane_date":null,"refusal":null,"reports":{"error":null,"last_sent_at":null,"last_seq":null,"pending":false,"url":""},"url":"http://plane/d.json"}"#,
        r#"{"configured":false}"#,
    ];
    const REPORTS: [&str; 2] = [
        r#"{"agent_version":"@VERSION@","clock":{"plane_date":"2023-11-14T22:16:41Z","status":"behind","system":"2023-11-14T22:29:59Z"},"engine":"waiting","modules":{"db":{"desired_digest":null,"health":null,"image_id":null,"last_error":null,"restart_count":null,"running_digest":null,"state":"pending"},"web":{"desired_digest":"sha256:b60b935389f7cf68e7877a80a4ded0dfc93e248b8807932536e1de0f771d259b","health":"unhealthy","image_id":"sha256:1mage","last_error":{"class":"crash-looping","message":"it keeps restarting"},"reload":{"landed":{"digest":"sha256:landed","version":"1.2.3"},"request":{"failure":"it did not settle","id":5,"status":"failed"}},"restart_count":4,"running_digest":"sha256:c071cf5f5ed6f884cc70155b6f05f755fd46a302d05e4261b7e92ce878bbfed8","state":"crash-looping"}},"node":"edge-1","passing":false,"plane":{"conflicts":[{"error":"a file owns it","module":"db"}],"error":"HTTP 503","held":{"accepted_at":"2023-11-14T22:15:00Z","expires":"2023-11-15T22:13:20Z","floor":false,"issued_at":"2023-11-14T22:13:20Z","key_id":"ed25519:abc","revision":9,"revoked":"no key trusted now signed it"},"last_contact":"2023-11-14T22:16:40Z","refusal":{"at":"2023-11-14T22:15:50Z","class":"rollback","detail":"revision 8 is older","revision":8},"url":"http://plane/nodes/edge-1/desired.json"},"quarantine":{"document":{"cause":"panicked at 6","crashes":6,"digest":"sha256:139d544b821b13ebea14f1b0fe18577222e415c2966e3a3511c4196055232202","since":1006},"everything":{"cause":"panicked at 5","crashes":5,"since":1005},"modules":[{"cause":"panicked at 3","crashes":3,"module":"web","since":1003}],"revision":{"cause":"panicked at 4","crashes":4,"revision":7,"since":1004},"summary":"every module (no pass runs), plane revision 7, module web, plane document sha256:139d544b821b"},"sent_at":"2023-11-14T22:29:59Z","seq":77,"undelivered":2}"#,
        r#"{"agent_version":"@VERSION@","clock":{"plane_date":null,"status":"unknown","system":"2023-11-14T22:29:59Z"},"engine":"reachable","modules":{"db":{"desired_digest":null,"health":null,"image_id":null,"last_error":null,"restart_count":null,"running_digest":null,"state":"pending"},"web":{"desired_digest":"sha256:b60b935389f7cf68e7877a80a4ded0dfc93e248b8807932536e1de0f771d259b","health":"unhealthy","image_id":"sha256:1mage","last_error":{"class":"crash-looping","message":"it keeps restarting"},"reload":{"landed":{"digest":"sha256:landed","version":"1.2.3"},"request":{"failure":"it did not settle","id":5,"status":"failed"}},"restart_count":4,"running_digest":"sha256:c071cf5f5ed6f884cc70155b6f05f755fd46a302d05e4261b7e92ce878bbfed8","state":"crash-looping"}},"node":"edge-1","passing":true,"plane":{"conflicts":[],"error":null,"held":null,"last_contact":null,"refusal":null,"url":"http://plane/d.json"},"quarantine":null,"sent_at":"2023-11-14T22:29:59Z","seq":77,"undelivered":2}"#,
    ];
    const STABLE_DIGESTS: [&str; 2] = [
        r#"sha256:aa4b43247f93fc415f3f3676cb5ab2d91947043e084630210b73fcd69c7058cc"#,
        r#"sha256:554f9f64e3766bc755b948e4b1b1ae24b5b65748035962c958e3c0e7f08e0623"#,
    ];
    const OUTCOMES: [&str; 7] = [
        r#"{"outcome":"not-modified"}"#,
        r#"{"outcome":"adopted","revision":3}"#,
        r#"{"outcome":"same","revision":3}"#,
        r#"{"class":"rollback","detail":"revision 2 is older","outcome":"refused","revision":2}"#,
        r#"{"class":"too-large","detail":"too large","outcome":"refused","revision":null}"#,
        r#"{"error":"HTTP 503","outcome":"failed","retry_after_secs":60}"#,
        r#"{"error":"gone","outcome":"failed","retry_after_secs":null}"#,
    ];

    fn golden(want: &str) -> String {
        want.replace("@VERSION@", crate::VERSION)
    }

    /// The exact text a value is sent as (compact; the API pretty-prints
    /// the same value, key for key).
    fn text(v: &J) -> String {
        serde_json::to_string(v).unwrap()
    }

    fn node_id() -> crate::model::names::NodeId {
        crate::model::names::NodeId::try_from("edge-1").unwrap()
    }

    fn outcomes() -> Vec<Outcome> {
        let refusal = |class: &str, detail: &str, revision| Refusal {
            class: class.into(),
            detail: detail.into(),
            revision,
            at: 9,
        };
        vec![
            Outcome::NotModified,
            Outcome::Adopted { revision: 3 },
            Outcome::Same { revision: 3 },
            Outcome::Refused(refusal("rollback", "revision 2 is older", Some(2))),
            Outcome::Refused(refusal("too-large", "too large", None)),
            Outcome::Failed {
                error: "HTTP 503".into(),
                retry_after: Some(Duration::from_secs(60)),
            },
            Outcome::Failed {
                error: "gone".into(),
                retry_after: None,
            },
        ]
    }

    fn node_text(n: &crate::status::NodeStatus) -> String {
        text(&crate::api::node_json(
            &node_id(),
            n,
            Duration::from_secs(30),
        ))
    }

    fn module_text(m: &crate::status::ModuleStatus) -> String {
        text(&serde_json::to_value(m).unwrap())
    }

    fn plane_text(p: Option<crate::plane::sync::PlaneStatus>) -> String {
        let h = p.map(|p| crate::api::PlaneHandle {
            status: std::sync::Arc::new(std::sync::Mutex::new(p)),
            nudge: tokio::sync::mpsc::channel(1).0,
        });
        text(&crate::api::plane::plane_json(h.as_ref()))
    }

    fn outcome_text(o: &Outcome) -> String {
        text(&crate::api::plane::outcome_json(o))
    }

    /// A report's bytes and the digest of its stable part.
    fn report(
        n: &crate::status::NodeStatus,
        p: &crate::plane::sync::PlaneStatus,
    ) -> (String, String) {
        let (updates, reloads) = fixtures::reloads();
        let board = fixtures::board();
        let parts = crate::plane::report::Parts {
            node: &node_id(),
            plane: p,
            status: n,
            board: &board,
            updates: &updates,
            reloads: &reloads,
        };
        let s = crate::plane::report::stable(&parts);
        let digest = crate::model::names::Digest::canonical("stead.report", &s).to_string();
        let f = crate::plane::report::full(s, 77, 1_700_000_999, p, 2);
        (
            String::from_utf8(serde_json::to_vec(&f).unwrap()).unwrap(),
            digest,
        )
    }

    #[test]
    fn the_wire_formats_are_as_they_were() {
        for (n, want) in fixtures::nodes().iter().zip(NODES) {
            assert_eq!(node_text(n), golden(want));
        }
        for (m, want) in fixtures::board().values().zip(MODULES) {
            assert_eq!(module_text(m), golden(want));
        }
        let planes = fixtures::planes().map(Some);
        for (p, want) in planes.into_iter().chain([None]).zip(PLANES) {
            assert_eq!(plane_text(p), golden(want));
        }
        for (o, want) in outcomes().iter().zip(OUTCOMES) {
            assert_eq!(outcome_text(o), golden(want));
        }
        let cases = fixtures::nodes().into_iter().zip(fixtures::planes());
        for ((n, p), (want, digest)) in cases.zip(REPORTS.iter().zip(STABLE_DIGESTS)) {
            let (got, got_digest) = report(&n, &p);
            assert_eq!(got, golden(want));
            assert_eq!(got_digest, digest);
        }
    }
}
