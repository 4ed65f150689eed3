//! What is checked once the tree is read: backreferences point at groups that exist (named
//! ones get their numbers), lookbehinds have a fixed length.

use super::*;

impl Parser<'_> {
    /// Every backreference points at a group that exists; named ones get their numbers.
    pub(super) fn check_refs(&self) -> Result<(), ParseError> {
        for r in &self.refs {
            match r {
                Ref::Number(n, at) if *n == 0 || *n > self.groups => {
                    return Err(self.error(E_NO_SUBPATTERN, *at));
                }
                Ref::Name(name, at) if !self.named.iter().any(|(m, _)| m == name) => {
                    return Err(self.error(E_NO_SUBPATTERN, *at));
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Fills the named backreferences' group numbers in, from the placeholders `named_ref` left.
pub(super) fn resolve_names(node: &mut Node, refs: &[(String, Vec<u32>)]) {
    match node {
        Node::Backref { groups, .. } => {
            if let [g] = groups.as_slice() {
                let i = (u32::MAX - g) as usize;
                if *g > u32::MAX - refs.len() as u32 {
                    *groups = refs[i].1.clone();
                }
            }
        }
        Node::Concat(v) | Node::Alt(v) => v.iter_mut().for_each(|x| resolve_names(x, refs)),
        Node::Capture(_, b) | Node::Group(b) | Node::Atomic(b) => resolve_names(b, refs),
        Node::Around { body, .. } | Node::Repeat { body, .. } => resolve_names(body, refs),
        _ => {}
    }
}

/// Every lookbehind's branches have a fixed length each (PCRE2's rule), reported at the
/// lookbehind's `(`.
pub(super) fn check_lookbehinds(
    p: &Parser<'_>,
    node: &Node,
    groups: &[Option<usize>],
) -> Result<(), ParseError> {
    let mut bad = None;
    node.walk(&mut |n| {
        let Node::Around {
            behind: true,
            body,
            offset,
            ..
        } = n
        else {
            return;
        };
        if bad.is_some() {
            return;
        }
        // PCRE2 reports a reference to a missing group in a lookbehind here, at the reference.
        bad = missing_ref(p, body);
        let branches: Vec<&Node> = match body.as_ref() {
            Node::Alt(v) => v.iter().collect(),
            b => vec![b],
        };
        if bad.is_none() && branches.iter().any(|b| b.fixed_len(groups).is_none()) {
            bad = Some(p.error(E_LOOKBEHIND, *offset));
        }
    });
    bad.map_or(Ok(()), Err)
}

/// The first reference to a missing group in a lookbehind's body, as PCRE2's lookbehind check
/// finds it: a lookahead inside is skipped (its references are checked later, with the rest
/// of the pattern's), a lookbehind inside is not.
fn missing_ref(p: &Parser<'_>, node: &Node) -> Option<ParseError> {
    match node {
        Node::Backref { groups, at, .. } => (groups.is_empty()
            || groups.iter().any(|&n| n == 0 || n > p.groups))
        .then(|| p.error(E_NO_SUBPATTERN, *at)),
        Node::Concat(v) | Node::Alt(v) => v.iter().find_map(|x| missing_ref(p, x)),
        Node::Capture(_, b) | Node::Group(b) | Node::Atomic(b) => missing_ref(p, b),
        Node::Around { behind: false, .. } => None,
        Node::Around { body, .. } | Node::Repeat { body, .. } => missing_ref(p, body),
        _ => None,
    }
}
