//! `auth_delay TIME` (nginx's core module, 1.17.10+): how long to hold a request that the
//! access phase refuses with 401 before answering, so that a password guess costs the guesser
//! time whatever the check cost the server.
//!
//! As nginx does it (checked against nginx 1.22): only a 401 is delayed, whether it came from
//! `satisfy all` or was the refusal `satisfy any` kept; a 403 of `deny` or of a missing user
//! file is answered at once. The delay is logged `delaying unauthorized request` at `info`.
//! The access phase sleeps [`AuthDelayLoc::delay_for`] on the worker's timer (no thread is
//! held) and then sends the 401. The client is watched meanwhile, as nginx's
//! `ngx_http_test_reading` does: one that closes (a half-close too) ends the request without
//! an answer, `client prematurely closed connection` at `info`, 499 in the access log.

use std::future::Future;
use std::time::Duration;

use shoal_conf::{Directive, Error};

use crate::conf::{set_once, time_arg, Args, Builder, Command, Ctx, Scope};
use crate::http::loc_conf;

pub static DIRECTIVES: &[Command] = &[Command::new(
    "auth_delay",
    Ctx::HSL,
    Args::ONE,
    set_auth_delay,
)];

/// The error-log line of a delayed 401 (at `info`).
pub const DELAYING: &str = "delaying unauthorized request";

/// The error-log line of a client that closed during the delay (at `info`).
pub const CLIENT_CLOSED: &str = "client prematurely closed connection";

/// Sleeps `d` while watching the client: `false` when it closed first. A client that sends
/// more (a pipelined request) is not watched any further.
pub async fn wait(d: Duration, client: Option<crate::http::request::ClientWatch<'_>>) -> bool {
    use std::task::Poll;
    let sleep = tokio::time::sleep(d);
    let Some(c) = client else {
        sleep.await;
        return true;
    };
    let mut sleep = std::pin::pin!(sleep);
    let mut watch = true;
    std::future::poll_fn(|cx| {
        if sleep.as_mut().poll(cx).is_ready() {
            return Poll::Ready(true);
        }
        if watch {
            match crate::http::upstream::run::poll_client_closed(c, cx) {
                Poll::Ready(true) => return Poll::Ready(false),
                Poll::Ready(false) => watch = false,
                Poll::Pending => {}
            }
        }
        Poll::Pending
    })
    .await
}

/// `auth_delay` at location level.
#[derive(Clone, Debug, Default)]
pub struct AuthDelayLoc {
    pub delay: Option<Duration>,
}

impl AuthDelayLoc {
    /// Fills what this level left unset from its parent.
    pub fn merge(&mut self, parent: &Self) {
        crate::conf::merge(&mut self.delay, &parent.delay);
    }

    /// `auth_delay` (default 0: none).
    pub fn delay(&self) -> Duration {
        self.delay.unwrap_or(Duration::ZERO)
    }

    /// How long to wait before answering `status` from the access phase: the delay for a 401,
    /// nothing otherwise or when it is 0.
    pub fn delay_for(&self, status: u16) -> Option<Duration> {
        let d = self.delay();
        (status == 401 && !d.is_zero()).then_some(d)
    }
}

fn set_auth_delay(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let t = time_arg(d, 0)?;
    set_once(&mut loc_conf(s).auth_delay.delay, t, d)
}

/// `auth_delay`'s place in the module list (the access phase reads it).
pub struct Module;

impl crate::http::modules::HttpModule for Module {
    type Loc = AuthDelayLoc;
    const DIRECTIVES: &'static [Command] = DIRECTIVES;

    fn merge(loc: &mut AuthDelayLoc, parent: &AuthDelayLoc) {
        loc.merge(parent);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_401_waits() {
        let lc = AuthDelayLoc {
            delay: Some(Duration::from_millis(1500)),
        };
        assert_eq!(lc.delay_for(401), Some(Duration::from_millis(1500)));
        assert_eq!(lc.delay_for(403), None);
        assert_eq!(lc.delay_for(500), None);
        assert_eq!(AuthDelayLoc::default().delay_for(401), None);
        let zero = AuthDelayLoc {
            delay: Some(Duration::ZERO),
        };
        assert_eq!(zero.delay_for(401), None);
    }

    #[test]
    fn inherited() {
        let parent = AuthDelayLoc {
            delay: Some(Duration::from_secs(2)),
        };
        let mut child = AuthDelayLoc::default();
        child.merge(&parent);
        assert_eq!(child.delay(), Duration::from_secs(2));
        let mut own = AuthDelayLoc {
            delay: Some(Duration::ZERO),
        };
        own.merge(&parent);
        assert_eq!(own.delay(), Duration::ZERO);
    }
}
