//! Prints what a stead store holds of each module, one line per module:
//! `<module> <applied state> <applied digest> <applied container> <observed container> <observed digest>`
//! (`-` where there is none). A tool for scripts (scripts/chaos.sh checks
//! the store against the engine with it); the agent must not be running.
//! Usage: cargo run --example store-dump -- <store file>

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args_os()
        .nth(1)
        .ok_or("usage: store-dump <store file>")?;
    let store = stead::store::Store::open(std::path::Path::new(&path))?;
    let applied = store.all_applied()?;
    let observed = store.all_observed()?;
    let mut modules: std::collections::BTreeSet<&String> = applied.keys().collect();
    modules.extend(observed.keys());
    for m in modules {
        let a = applied.get(m);
        let o = observed.get(m);
        println!(
            "{m} {} {} {} {} {}",
            a.map_or("-".into(), |a| format!("{:?}", a.state).to_lowercase()),
            a.map_or("-".into(), |a| a.digest.to_string()),
            a.and_then(|a| a.container_id.clone())
                .unwrap_or_else(|| "-".into()),
            o.map_or("-", |o| o.container_id.as_str()),
            o.and_then(|o| o.digest.as_ref())
                .map_or("-".into(), |d| d.to_string()),
        );
    }
    Ok(())
}
