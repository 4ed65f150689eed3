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
        if let (
            None,
            Node::Around {
                behind: true,
                body,
                offset,
                ..
            },
        ) = (&bad, n)
        {
            bad = lookbehind_error(p, body, *offset, groups);
        }
    });
    bad.map_or(Ok(()), Err)
}

/// The first thing in a lookbehind's body PCRE2 refuses, in the order its check meets them:
/// a reference to a missing group (reported at the reference) or a part without a fixed length
/// (reported at the lookbehind's `(`). Each branch may have its own length.
fn lookbehind_error(
    p: &Parser<'_>,
    body: &Node,
    offset: usize,
    groups: &[Option<usize>],
) -> Option<ParseError> {
    match body {
        Node::Alt(v) => v
            .iter()
            .find_map(|b| fixed_or_error(p, b, offset, groups).err()),
        b => fixed_or_error(p, b, offset, groups).err(),
    }
}

/// A part of a lookbehind's branch: its fixed length, or the first error in it.
fn fixed_or_error(
    p: &Parser<'_>,
    node: &Node,
    offset: usize,
    groups: &[Option<usize>],
) -> Result<usize, ParseError> {
    let unfixed = || p.error(E_LOOKBEHIND, offset);
    match node {
        Node::Backref { .. } => match missing_ref(p, node) {
            Some(e) => Err(e),
            None => node.fixed_len(groups).ok_or_else(unfixed),
        },
        Node::Concat(v) => v.iter().try_fold(0usize, |n, x| {
            n.checked_add(fixed_or_error(p, x, offset, groups)?)
                .ok_or_else(unfixed)
        }),
        // A group's branches are measured in turn; the first that differs stops the check.
        Node::Alt(v) => {
            let mut first = None;
            for x in v {
                let len = fixed_or_error(p, x, offset, groups)?;
                if *first.get_or_insert(len) != len {
                    return Err(unfixed());
                }
            }
            Ok(first.unwrap_or(0))
        }
        Node::Capture(_, b) | Node::Group(b) | Node::Atomic(b) => {
            fixed_or_error(p, b, offset, groups)
        }
        // A lookahead is skipped (checked later with the rest of the pattern); a lookbehind
        // inside is checked as a lookbehind, at its own `(`.
        Node::Around { behind: false, .. } => Ok(0),
        Node::Around {
            body, offset: own, ..
        } => lookbehind_error(p, body, *own, groups).map_or(Ok(0), Err),
        Node::Repeat { body, min, max, .. } => {
            let len = fixed_or_error(p, body, offset, groups)?;
            if matches!(**body, Node::Around { behind: false, .. }) {
                return Ok(0);
            }
            if Some(*min) != *max {
                return Err(unfixed());
            }
            len.checked_mul(*min as usize).ok_or_else(unfixed)
        }
        _ => node.fixed_len(groups).ok_or_else(unfixed),
    }
}

/// The first reference to a missing group in a lookbehind's body, as PCRE2's lookbehind check
/// finds it: a lookahead inside is skipped (its references are checked later, with the rest
/// of the pattern's), a lookbehind inside is not.
fn missing_ref(p: &Parser<'_>, node: &Node) -> Option<ParseError> {
    match node {
        Node::Backref { groups, at, .. } => (groups.is_empty()
            || groups.iter().any(|&n| n == 0 || n > p.groups))
        .then(|| p.error(E_NO_SUBPATTERN, first_small_ref(p, groups, *at))),
        Node::Concat(v) | Node::Alt(v) => v.iter().find_map(|x| missing_ref(p, x)),
        Node::Capture(_, b) | Node::Group(b) | Node::Atomic(b) => missing_ref(p, b),
        Node::Around { behind: false, .. } => None,
        Node::Around { body, .. } | Node::Repeat { body, .. } => missing_ref(p, body),
        _ => None,
    }
}

/// Where PCRE2 reports a missing group referred to by number: a number below 10 keeps only the
/// place of its first reference anywhere in the pattern, so that is where it is reported.
fn first_small_ref(p: &Parser<'_>, groups: &[u32], at: usize) -> usize {
    let [n] = groups else { return at };
    let numbered = |r: &&Ref| matches!(r, Ref::Number(m, _) if m == n);
    if *n >= 10
        || !p
            .refs
            .iter()
            .filter(numbered)
            .any(|r| matches!(r, Ref::Number(_, a) if *a == at))
    {
        return at;
    }
    match p.refs.iter().find(numbered) {
        Some(Ref::Number(_, first)) => *first,
        _ => at,
    }
}
