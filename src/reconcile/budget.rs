//! The site's disruption budgets, as a pass meets them: before it
//! disrupts anything (a recreate, a restart, a reboot) under a group's
//! `budget`, the device must hold its site's lease; the pass asks the
//! plane's lease keeper for it (`want`), defers what would disrupt until
//! the keeper says it is held (waking the loop), and stops asking once
//! nothing is left to disrupt and what it disrupted has settled. The
//! keeper (`plane/lease.rs`) does the host's writes; the rules are the
//! core's [`crate::model::budget`].

use tokio::sync::watch;

use crate::model::budget::Standing;

use super::Reconciler;

/// The pass's end of the lease keeper.
pub struct Link {
    /// Whether the pass wants the leases.
    pub want: watch::Sender<bool>,
    /// Where the device stands, as the keeper says.
    pub standing: watch::Receiver<Standing>,
}

/// The link's two ends: the pass's, and the keeper's (`want`, `standing`).
pub fn link() -> (Link, watch::Receiver<bool>, watch::Sender<Standing>) {
    let (want_tx, want_rx) = watch::channel(false);
    let (standing_tx, standing_rx) = watch::channel(Standing::Not(
        "waits for the site's lease: not taken yet".into(),
    ));
    (
        Link {
            want: want_tx,
            standing: standing_rx,
        },
        want_rx,
        standing_tx,
    )
}

impl Reconciler {
    /// The lease keeper this pass asks before it disrupts.
    pub fn set_budget(&mut self, link: Link) {
        self.budget = Some(link);
    }

    /// Whether budgets are in force (a group the device is in sets one).
    fn budgets_in_force(&self) -> bool {
        self.maintenance
            .as_ref()
            .and_then(|m| m.borrow().clone())
            .is_some_and(|d| !d.budgets.is_empty())
    }

    /// Whether this pass may disrupt under the site's budgets: `Err` says
    /// what it waits for. Asking counts as wanting the lease this pass.
    pub(super) fn budget_door(&mut self) -> Result<(), String> {
        let Some(link) = &self.budget else {
            return Ok(());
        };
        if !self.budgets_in_force() {
            return Ok(());
        }
        self.budget_asked = true;
        link.want.send_if_modified(|w| !std::mem::replace(w, true));
        link.standing.borrow().lets(crate::host::clock::now())
    }

    /// At a pass's end: the lease is wanted still while the pass asked
    /// for it, or while it is held and a module is starting or settling
    /// (what was disrupted is confirmed before the site's next device
    /// goes); else the keeper lets it go.
    pub(super) fn budget_after(&mut self, settling: bool) {
        let asked = std::mem::take(&mut self.budget_asked);
        let Some(link) = &self.budget else {
            return;
        };
        let held = matches!(*link.standing.borrow(), Standing::Held { .. });
        let want = asked || (held && settling && self.budgets_in_force());
        link.want
            .send_if_modified(|w| std::mem::replace(w, want) != want);
    }
}
