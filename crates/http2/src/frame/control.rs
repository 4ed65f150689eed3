//! The control frames a peer sends: PRIORITY, RST_STREAM, SETTINGS, PING, GOAWAY and
//! WINDOW_UPDATE (RFC 9113, 6.3 to 6.9).

use super::conn::Connection;
use super::parse::{conn_err, conn_err_n, u32_at, Head};
use super::{flag, setting, write};
use super::{ConnError, Event, Reason, Role};
use super::{DEFAULT_FRAME_SIZE, MAX_FRAME_SIZE, MAX_WINDOW};

impl Connection {
    pub(super) fn priority(&mut self, head: Head, payload: &[u8]) -> Result<(), ConnError> {
        if head.stream == 0 {
            return Err(conn_err(
                Reason::PROTOCOL_ERROR,
                "client sent PRIORITY frame with incorrect identifier",
            ));
        }
        if payload.len() != 5 {
            return self.stream_error(head.stream, Reason::FRAME_SIZE_ERROR);
        }
        if u32_at(payload, 0) & MAX_WINDOW == head.stream {
            return self.stream_error(head.stream, Reason::PROTOCOL_ERROR);
        }
        // Priorities are advice (RFC 9113, 5.3): answered in the order streams come.
        self.flood.idle_frame()
    }

    pub(super) fn rst_stream(&mut self, head: Head, payload: &[u8]) -> Result<(), ConnError> {
        let id = head.stream;
        if id == 0 {
            return Err(conn_err(
                Reason::PROTOCOL_ERROR,
                "client sent RST_STREAM frame with incorrect identifier",
            ));
        }
        if payload.len() != 4 {
            return Err(conn_err_n(
                Reason::FRAME_SIZE_ERROR,
                "client sent RST_STREAM frame with incorrect length {}",
                payload.len() as u32,
                0,
            ));
        }
        if self.idle(id) {
            return Err(conn_err(
                Reason::PROTOCOL_ERROR,
                "sent RST_STREAM for an idle stream",
            ));
        }
        let code = Reason(u32_at(payload, 0));
        match self.streams.remove(id) {
            Some(s) => {
                self.events.push_back(Event::Reset {
                    stream: id,
                    code,
                    by_peer: true,
                });
                // (A server that resets our streams makes us do no work: it only refuses.)
                if !s.local_closed && self.role == Role::Server {
                    self.flood.early_reset(self.cfg.max_concurrent_streams)?;
                }
                Ok(())
            }
            None => self.flood.idle_frame(),
        }
    }

    pub(super) fn settings(&mut self, head: Head, payload: &[u8]) -> Result<(), ConnError> {
        if head.stream != 0 {
            return Err(conn_err(
                Reason::PROTOCOL_ERROR,
                "client sent SETTINGS frame with incorrect identifier",
            ));
        }
        if head.has(flag::ACK) {
            if !payload.is_empty() {
                return Err(conn_err(
                    Reason::FRAME_SIZE_ERROR,
                    "client sent SETTINGS frame with the ACK flag and nonzero length",
                ));
            }
            if self.settings_unacked > 0 {
                self.settings_unacked -= 1;
                // Our SETTINGS_INITIAL_WINDOW_SIZE is in force from now on.
                let delta = self.cfg.initial_window_size as i64 - self.local_initial as i64;
                for s in self.streams.iter_mut() {
                    s.recv_window = (s.recv_window as i64 + delta) as i32;
                }
                self.local_initial = self.cfg.initial_window_size;
            }
            return self.flood.idle_frame();
        }
        if payload.len() % 6 != 0 {
            return Err(conn_err_n(
                Reason::FRAME_SIZE_ERROR,
                "client sent SETTINGS frame with incorrect length {}",
                payload.len() as u32,
                0,
            ));
        }
        self.flood.idle_frame()?;
        self.answer_room()?;
        let mut window = None;
        for p in payload.chunks_exact(6) {
            let value = u32_at(p, 2);
            match u16::from_be_bytes([p[0], p[1]]) {
                setting::HEADER_TABLE_SIZE => self.peer.header_table_size = value,
                setting::ENABLE_PUSH if value > 1 || (value == 1 && self.role == Role::Client) => {
                    return Err(conn_err_n(
                        Reason::PROTOCOL_ERROR,
                        "client sent SETTINGS frame with incorrect ENABLE_PUSH value {}",
                        value,
                        0,
                    ));
                }
                setting::ENABLE_PUSH => self.peer.enable_push = value == 1,
                setting::INITIAL_WINDOW_SIZE if value > MAX_WINDOW => {
                    return Err(conn_err_n(
                        Reason::FLOW_CONTROL_ERROR,
                        "client sent SETTINGS frame with incorrect INITIAL_WINDOW_SIZE value {}",
                        value,
                        0,
                    ));
                }
                setting::INITIAL_WINDOW_SIZE => window = Some(value),
                setting::MAX_FRAME_SIZE
                    if !(DEFAULT_FRAME_SIZE..=MAX_FRAME_SIZE).contains(&value) =>
                {
                    return Err(conn_err_n(
                        Reason::PROTOCOL_ERROR,
                        "client sent SETTINGS frame with incorrect MAX_FRAME_SIZE value {}",
                        value,
                        0,
                    ));
                }
                setting::MAX_FRAME_SIZE => self.peer.max_frame_size = value,
                setting::MAX_HEADER_LIST_SIZE => self.peer.max_header_list_size = Some(value),
                // What a client may open (a server's is about pushes, which it never sends).
                setting::MAX_CONCURRENT_STREAMS => self.peer.max_concurrent_streams = Some(value),
                // Unknown ones are ignored (RFC 9113, 6.5.2).
                _ => {}
            }
        }
        if let Some(w) = window {
            // Every stream's send window moves by the difference (RFC 9113, 6.9.2).
            let delta = w as i64 - self.peer.initial_window_size as i64;
            for s in self.streams.iter_mut() {
                let new = s.send_window as i64 + delta;
                if new > MAX_WINDOW as i64 {
                    return Err(conn_err(
                        Reason::FLOW_CONTROL_ERROR,
                        "sent SETTINGS_INITIAL_WINDOW_SIZE that overflowed a window",
                    ));
                }
                s.send_window = new as i32;
            }
            self.peer.initial_window_size = w;
        }
        write::settings_ack(&mut self.out);
        self.events.push_back(Event::SettingsChanged);
        Ok(())
    }

    pub(super) fn ping_frame(&mut self, head: Head, payload: &[u8]) -> Result<(), ConnError> {
        if head.stream != 0 {
            return Err(conn_err(
                Reason::PROTOCOL_ERROR,
                "client sent PING frame with incorrect identifier",
            ));
        }
        if payload.len() != 8 {
            return Err(conn_err_n(
                Reason::FRAME_SIZE_ERROR,
                "client sent PING frame with incorrect length {}",
                payload.len() as u32,
                0,
            ));
        }
        self.flood.idle_frame()?;
        if head.has(flag::ACK) {
            return Ok(());
        }
        self.answer_room()?;
        let mut data = [0; 8];
        data.copy_from_slice(payload);
        write::ping(&mut self.out, true, data);
        Ok(())
    }

    pub(super) fn goaway_frame(&mut self, head: Head, payload: &[u8]) -> Result<(), ConnError> {
        if head.stream != 0 {
            return Err(conn_err(
                Reason::PROTOCOL_ERROR,
                "client sent GOAWAY frame with incorrect identifier",
            ));
        }
        if payload.len() < 8 {
            return Err(conn_err_n(
                Reason::FRAME_SIZE_ERROR,
                "client sent GOAWAY frame with incorrect length {}",
                payload.len() as u32,
                0,
            ));
        }
        self.goaway_received = true;
        let last_stream = u32_at(payload, 0) & MAX_WINDOW;
        let code = Reason(u32_at(payload, 4));
        self.events.push_back(Event::GoAway { last_stream, code });
        if self.role == Role::Client {
            // Our streams past its last were not processed (RFC 9113, 6.8): another
            // connection may take them.
            while let Some(id) = self.streams.last_id().filter(|&id| id > last_stream) {
                self.streams.remove(id);
                self.events.push_back(Event::Reset {
                    stream: id,
                    code: Reason::REFUSED_STREAM,
                    by_peer: true,
                });
            }
        }
        Ok(())
    }

    pub(super) fn window_update(&mut self, head: Head, payload: &[u8]) -> Result<(), ConnError> {
        let id = head.stream;
        if payload.len() != 4 {
            return Err(conn_err_n(
                Reason::FRAME_SIZE_ERROR,
                "client sent WINDOW_UPDATE frame with incorrect length {}",
                payload.len() as u32,
                0,
            ));
        }
        let inc = u32_at(payload, 0) & MAX_WINDOW;
        self.flood.idle_frame()?;
        if id == 0 {
            if inc == 0 {
                return Err(conn_err(
                    Reason::PROTOCOL_ERROR,
                    "client sent WINDOW_UPDATE frame with incorrect window increment 0",
                ));
            }
            if self.send_window + inc as i64 > MAX_WINDOW as i64 {
                return Err(conn_err_n(
                    Reason::FLOW_CONTROL_ERROR,
                    "client violated connection flow control: received WINDOW_UPDATE frame with window increment {} not allowed for window {}",
                    inc,
                    self.send_window.clamp(0, MAX_WINDOW as i64) as u32,
                ));
            }
            self.send_window += inc as i64;
            if self.send_window > 0 {
                self.events.push_back(Event::WindowOpened { stream: 0 });
            }
            return Ok(());
        }
        if self.idle(id) {
            return Err(conn_err(
                Reason::PROTOCOL_ERROR,
                "sent WINDOW_UPDATE for an idle stream",
            ));
        }
        let code = match self.streams.get(id) {
            // Closed streams may still get one in flight (RFC 9113, 6.9).
            None => return Ok(()),
            Some(_) if inc == 0 => Reason::PROTOCOL_ERROR,
            Some(s) if s.send_window as i64 + inc as i64 > MAX_WINDOW as i64 => {
                Reason::FLOW_CONTROL_ERROR
            }
            Some(s) => {
                s.send_window += inc as i32;
                if s.send_window > 0 {
                    self.events.push_back(Event::WindowOpened { stream: id });
                }
                return Ok(());
            }
        };
        self.stream_error(id, code)
    }
}
