//! The one check of an append batch. Every backend makes it first, before
//! it numbers, stages or sends anything, from its own declared limits: so
//! a batch is refused the same way whoever calls the [`Storage`] — the
//! [`Log`](crate::Log), the server, or a caller of the trait itself — and
//! no backend keeps a copy of the rules.
//!
//! [`Storage`]: crate::storage::Storage

use std::collections::HashSet;

use crate::error::{Error, Result};
use crate::format::frame;
use crate::model::{MAX_BATCH_BYTES, check_entry};
use crate::storage::NewEntry;

/// What a backend accepts, as its [`Capabilities`](crate::storage::Capabilities)
/// and [`Storage::supports_append_ids`](crate::storage::Storage::supports_append_ids)
/// declare it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppendLimits {
    /// The largest payload.
    pub max_entry_bytes: usize,
    /// Whether entries may carry append ids.
    pub append_ids: bool,
}

/// Checks `batch` before anything is numbered: at least one entry; each
/// entry as [`AppendRequest::validate`](crate::AppendRequest::validate)
/// checks a request; no append id twice in the batch, and none at all
/// where the backend does not honour them; at most
/// [`MAX_BATCH_BYTES`] of frames.
///
/// Errors: `InvalidInput` (saying which rule); `Unsupported` for an append
/// id on a backend without them. Nothing is written either way.
pub fn check_append(batch: &[NewEntry], limits: AppendLimits) -> Result<()> {
    if batch.is_empty() {
        return Err(Error::invalid_input(
            "an append batch needs at least one entry",
        ));
    }
    let mut ids = HashSet::new();
    let mut total = 0usize;
    for entry in batch {
        let id = entry.append_id.as_deref();
        check_entry(&entry.tags, entry.data.len(), id, limits.max_entry_bytes)?;
        if let Some(id) = id {
            if !limits.append_ids {
                return Err(Error::unsupported(
                    "this storage backend does not support append ids",
                ));
            }
            if !ids.insert(id) {
                return Err(Error::invalid_input(format!(
                    "append id {id:?} appears twice in one batch"
                )));
            }
        }
        total = total.saturating_add(frame::encoded_len_with_id(
            &entry.tags,
            id,
            entry.data.len(),
        ));
    }
    if total > MAX_BATCH_BYTES {
        return Err(Error::invalid_input(format!(
            "an append batch of {total} encoded bytes exceeds the limit of {MAX_BATCH_BYTES}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;
    use crate::model::{MAX_APPEND_ID_BYTES, MAX_TAGS_PER_ENTRY};

    const LIMITS: AppendLimits = AppendLimits {
        max_entry_bytes: 16,
        append_ids: true,
    };

    fn entry(tags: &[&str], data: &[u8], id: Option<&str>) -> NewEntry {
        NewEntry {
            tags: tags.iter().map(|t| t.parse().unwrap()).collect(),
            data: bytes::Bytes::copy_from_slice(data),
            expected_version: None,
            append_id: id.map(str::to_owned),
        }
    }

    fn kind(batch: &[NewEntry], limits: AppendLimits) -> Option<ErrorKind> {
        check_append(batch, limits).err().map(|e| e.kind())
    }

    #[test]
    fn each_rule_refuses_on_its_own() {
        let ok = entry(&["a"], b"x", Some("id-1"));
        assert_eq!(kind(std::slice::from_ref(&ok), LIMITS), None);
        let many: Vec<String> = (0..=MAX_TAGS_PER_ENTRY).map(|i| format!("t{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let long_id = "i".repeat(MAX_APPEND_ID_BYTES + 1);
        let invalid = [
            vec![],
            vec![entry(&[], b"x", None)],
            vec![entry(&many, b"x", None)],
            vec![entry(&["a", "b", "a"], b"x", None)],
            vec![entry(&["a"], &[0; 17], None)],
            vec![entry(&["a"], b"x", Some(""))],
            vec![entry(&["a"], b"x", Some(&long_id))],
            vec![entry(&["a"], b"x", Some("bad\nid"))],
            vec![entry(&["a"], b"x", Some("tab\there"))],
            vec![ok.clone(), entry(&["b"], b"y", Some("id-1"))],
        ];
        for batch in &invalid {
            assert_eq!(
                kind(batch, LIMITS),
                Some(ErrorKind::InvalidInput),
                "{batch:?}"
            );
        }
        // The largest payload and id pass; one entry's rule holds for each.
        let at_limits = entry(&["a"], &[0; 16], Some(&long_id[1..]));
        assert_eq!(kind(&[at_limits, entry(&["b"], b"", None)], LIMITS), None);
    }

    #[test]
    fn ids_are_refused_where_the_backend_has_none() {
        let no_ids = AppendLimits {
            append_ids: false,
            ..LIMITS
        };
        let batch = [entry(&["a"], b"x", None), entry(&["a"], b"y", Some("k"))];
        assert_eq!(kind(&batch, no_ids), Some(ErrorKind::Unsupported));
        assert_eq!(kind(&batch[..1], no_ids), None);
    }

    #[test]
    fn a_batch_past_the_frame_limit_is_refused() {
        let big = AppendLimits {
            max_entry_bytes: MAX_BATCH_BYTES,
            append_ids: true,
        };
        let half = bytes::Bytes::from(vec![0u8; MAX_BATCH_BYTES / 2]);
        let e = |t: &str| NewEntry {
            tags: vec![t.parse().unwrap()],
            data: half.clone(),
            expected_version: None,
            append_id: None,
        };
        assert_eq!(kind(&[e("a")], big), None);
        assert_eq!(kind(&[e("a"), e("b")], big), Some(ErrorKind::InvalidInput));
    }
}
