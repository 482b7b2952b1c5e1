//! The replication's pushes and pulls: reading the outbox and sending what the server lacks,
//! listing `_changes`, fetching unknown revisions and checkpointing.

use super::*;

impl Replicator {
    pub(super) fn read_checkpoint(&mut self, out: &mut Vec<SyncEffect>) {
        self.phase = Phase::ReadingCheckpoint;
        let path = self.checkpoint_path();
        out.push(self.request(Method::Get, path, None, false));
    }

    pub(super) fn read_outbox(&mut self, out: &mut Vec<SyncEffect>) {
        self.local_changed = false;
        self.phase = Phase::ReadingOutbox;
        self.set_state("pushing");
        out.push(SyncEffect::ReadOutbox { limit: BATCH });
    }

    /// The outbox read: each changed doc gets its next revision (unless its body is the one the
    /// replica already holds), and `_revs_diff` asks what the server lacks.
    pub(super) fn push(&mut self, entries: Vec<OutboxEntry>, out: &mut Vec<SyncEffect>) {
        if entries.is_empty() {
            return self.list(out);
        }
        let docs: Vec<(OutboxEntry, RevInfo)> = entries
            .into_iter()
            .map(|entry| {
                let fresh = next_revision(entry.known.as_ref(), entry.body.as_ref());
                let info = match &entry.known {
                    Some(known) if known.body_hash == fresh.body_hash => known.clone(),
                    _ => fresh,
                };
                (entry, info)
            })
            .collect();
        let mut diff = Map::new();
        for (entry, info) in &docs {
            diff.insert(entry.id.clone(), json!([info.rev]));
        }
        self.phase = Phase::Diffing { docs };
        out.push(self.request(
            Method::Post,
            "_revs_diff".into(),
            Some(Value::Object(diff)),
            false,
        ));
    }

    pub(super) fn send(
        &mut self,
        all: Vec<(OutboxEntry, RevInfo)>,
        missing: Vec<String>,
        out: &mut Vec<SyncEffect>,
    ) {
        let docs: Vec<Value> = all
            .iter()
            .filter(|(entry, _)| missing.contains(&entry.id))
            .map(|(entry, info)| outgoing_doc(entry, info))
            .collect();
        if docs.is_empty() {
            // The server has every revision already (another device made the same changes).
            return self.record_push(all, out);
        }
        self.phase = Phase::Sending { all, missing };
        out.push(self.request(
            Method::Post,
            "_bulk_docs".into(),
            Some(json!({"new_edits": false, "docs": docs})),
            false,
        ));
    }

    /// The pushed docs' revisions are recorded (and their outbox entries cleared); then the
    /// outbox again.
    pub(super) fn record_push(
        &mut self,
        all: Vec<(OutboxEntry, RevInfo)>,
        out: &mut Vec<SyncEffect>,
    ) {
        let pushed = all
            .into_iter()
            .map(|(entry, info)| Pushed {
                id: entry.id,
                mark: entry.mark,
                info,
            })
            .collect();
        self.phase = Phase::RecordingPush;
        out.push(SyncEffect::Store {
            pulled: Vec::new(),
            pushed,
        });
    }

    pub(super) fn list(&mut self, out: &mut Vec<SyncEffect>) {
        if self.local_changed {
            return self.read_outbox(out);
        }
        self.phase = Phase::Listing { wait: false };
        self.set_state("pulling");
        let path = format!(
            "_changes?style=all_docs&limit={BATCH}&since={}",
            encode(&seq_text(&self.since))
        );
        out.push(self.request(Method::Get, path, None, false));
    }

    pub(super) fn listen(&mut self, out: &mut Vec<SyncEffect>) {
        self.phase = Phase::Listing { wait: true };
        self.set_state("live");
        self.status.error = None;
        self.failures = 0;
        let path = format!(
            "_changes?style=all_docs&limit={BATCH}&feed=longpoll&timeout={LONGPOLL_MS}&since={}",
            encode(&seq_text(&self.since))
        );
        out.push(self.request(Method::Get, path, None, true));
    }

    /// A `_changes` page: nothing new → wait on the feed; else ask what is known of its docs.
    pub(super) fn listed(&mut self, body: Value, out: &mut Vec<SyncEffect>) {
        let last_seq = body
            .get("last_seq")
            .cloned()
            .unwrap_or_else(|| self.since.clone());
        let results = body
            .get("results")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let changes: Vec<(String, Vec<String>)> = results
            .iter()
            .filter_map(|r| {
                let id = r.get("id")?.as_str()?;
                if !(id.starts_with("chat:") || id.starts_with("msg:")) {
                    return None;
                }
                let revs = r
                    .get("changes")?
                    .as_array()?
                    .iter()
                    .filter_map(|c| c.get("rev")?.as_str().map(str::to_string))
                    .collect();
                Some((id.to_string(), revs))
            })
            .collect();
        if results.is_empty() {
            if last_seq != self.since {
                return self.checkpoint(last_seq, out);
            }
            if self.local_changed {
                return self.read_outbox(out);
            }
            return self.listen(out);
        }
        if changes.is_empty() {
            return self.checkpoint(last_seq, out);
        }
        self.set_state("pulling");
        let ids = changes.iter().map(|(id, _)| id.clone()).collect();
        self.phase = Phase::Comparing { changes, last_seq };
        out.push(SyncEffect::ReadKnown { ids });
    }

    /// The revisions not known here (of docs without unpushed changes: those are pushed first,
    /// and the push makes the server list them again with every leaf) are fetched — and of a
    /// document in conflict, every leaf but the one held here and those seen before whose rank is
    /// kept, so its winner is chosen among all of them (the same on every device), not between the
    /// one held here and the newcomers.
    pub(super) fn fetch(
        &mut self,
        changes: Vec<(String, Vec<String>)>,
        last_seq: Value,
        known: HashMap<String, RevInfo>,
        pending: Vec<String>,
        out: &mut Vec<SyncEffect>,
    ) {
        if !pending.is_empty() {
            // Local changes first: their push lists these docs again with every leaf.
            self.local_changed = true;
        }
        let wanted: Vec<Value> = changes
            .iter()
            .filter(|(id, _)| !pending.contains(id))
            .flat_map(|(id, revs)| {
                let local = known.get(id);
                let conflict = revs.len() > 1;
                revs.iter()
                    .filter(move |rev| match local {
                        // A leaf seen before is fetched again only if what ranks it is not kept,
                        // or it now beats the one held here (changed here since).
                        Some(l) if conflict => {
                            let loser = l.losers.iter().find(|loser| loser.rev == **rev);
                            l.rev != **rev
                                && !l.in_history(rev)
                                && loser.is_none_or(|loser| beats(id, &loser.info(), l))
                        }
                        Some(l) => !l.knows(rev),
                        None => true,
                    })
                    .map(move |rev| json!({"id": id, "rev": rev}))
            })
            .collect();
        if wanted.is_empty() {
            if pending.is_empty() {
                return self.checkpoint(last_seq, out);
            }
            return self.read_outbox(out);
        }
        let last_seq = if pending.is_empty() {
            last_seq
        } else {
            self.since.clone()
        };
        let listed = changes.into_iter().collect();
        self.phase = Phase::Fetching {
            known,
            listed,
            last_seq,
        };
        out.push(self.request(
            Method::Post,
            "_bulk_get?revs=true".into(),
            Some(json!({"docs": wanted})),
            false,
        ));
    }

    pub(super) fn checkpoint(&mut self, last_seq: Value, out: &mut Vec<SyncEffect>) {
        if last_seq == self.since {
            return self.list_or_push(out);
        }
        let mut doc = json!({"last_seq": last_seq, "replicator": "palaver"});
        if let Some(rev) = &self.checkpoint_rev {
            doc["_rev"] = json!(rev);
        }
        self.phase = Phase::Checkpointing { last_seq };
        let path = self.checkpoint_path();
        out.push(self.request(Method::Put, path, Some(doc), false));
    }

    pub(super) fn list_or_push(&mut self, out: &mut Vec<SyncEffect>) {
        if self.local_changed {
            self.read_outbox(out)
        } else {
            self.list(out)
        }
    }
}

/// The document sent for a pushed entry: its body with `_id`, `_rev` and `_revisions`.
pub(super) fn outgoing_doc(entry: &OutboxEntry, info: &RevInfo) -> Value {
    let mut doc = match &entry.body {
        Some(Value::Object(map)) => map.clone(),
        _ => Map::new(),
    };
    doc.insert("_id".into(), json!(entry.id));
    doc.insert("_rev".into(), json!(info.rev));
    let generation = parse_rev(&info.rev).map_or(1, |(g, _)| g);
    doc.insert(
        "_revisions".into(),
        json!({"start": generation, "ids": info.ancestry}),
    );
    if is_removal(entry.body.as_ref()) {
        doc.insert("_deleted".into(), json!(true));
    }
    Value::Object(doc)
}

/// One leaf a winner is chosen among: fetched, the one held here, or one seen before (its rank).
enum Candidate {
    Fetched(Value, RevInfo),
    Held(RevInfo),
    Seen(RevInfo),
}

impl Candidate {
    fn info(&self) -> &RevInfo {
        match self {
            Candidate::Fetched(_, info) | Candidate::Held(info) | Candidate::Seen(info) => info,
        }
    }
}

/// `_bulk_get`'s answer → what to store: per document, the winning leaf (`beats`) among those
/// fetched, the one held here while the server lists it as a leaf, and those seen before; the
/// others are remembered as seen, with their rank. `true` when a leaf seen before won: it is
/// forgotten so the next pass (from the same checkpoint) fetches it.
pub(super) fn choose_pulled(
    known: &HashMap<String, RevInfo>,
    listed: &HashMap<String, Vec<String>>,
    body: &Value,
) -> (Vec<Pulled>, bool) {
    let mut leaves: BTreeMap<String, Vec<(Value, RevInfo)>> = BTreeMap::new();
    for result in body
        .get("results")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        for doc in result
            .get("docs")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let Some(doc) = doc.get("ok") else { continue };
            let (Some(id), Some(info)) = (doc.get("_id").and_then(Value::as_str), info_of(doc))
            else {
                continue;
            };
            leaves
                .entry(id.to_string())
                .or_default()
                .push((doc.clone(), info));
        }
    }
    let mut out = Vec::new();
    let mut again = false;
    for (id, fetched) in leaves {
        let local = known.get(&id);
        let listed_revs = listed.get(&id).map(Vec::as_slice).unwrap_or_default();
        let mut candidates: Vec<Candidate> = fetched
            .into_iter()
            .filter(|(_, info)| local.is_none_or(|l| !l.in_history(&info.rev)))
            .map(|(doc, info)| Candidate::Fetched(doc, info))
            .collect();
        if let Some(l) = local {
            if listed_revs.contains(&l.rev) || candidates.is_empty() {
                candidates.push(Candidate::Held(l.clone()));
            }
            let fetched_now = |rev: &str| candidates.iter().any(|c| c.info().rev == rev);
            let seen: Vec<Candidate> = l
                .losers
                .iter()
                .filter(|loser| listed_revs.contains(&loser.rev) && !fetched_now(&loser.rev))
                .map(|loser| Candidate::Seen(loser.info()))
                .collect();
            candidates.extend(seen);
        }
        let Some(best) = (0..candidates.len()).reduce(|best, i| {
            if beats(&id, candidates[i].info(), candidates[best].info()) {
                i
            } else {
                best
            }
        }) else {
            continue;
        };
        let winner = candidates.swap_remove(best);
        let losers: Vec<RevInfo> = candidates.iter().map(|c| c.info().clone()).collect();
        let mut forget = None;
        let (doc, mut info) = match winner {
            Candidate::Fetched(doc, info) => (Some(doc), info),
            Candidate::Held(info) => (None, info),
            Candidate::Seen(seen) => {
                // Its body is not here: forget it, so the next pass fetches it.
                again = true;
                let Some(mut info) = local.cloned() else {
                    continue;
                };
                info.seen.retain(|s| *s != seen.rev);
                info.losers.retain(|l| l.rev != seen.rev);
                forget = Some(seen.rev);
                (None, info)
            }
        };
        let mut seen: Vec<String> = losers.iter().map(|l| l.rev.clone()).collect();
        if let Some(l) = local {
            seen.extend(l.seen.iter().cloned());
            if doc.is_some() && !info.descends_from(&l.rev) {
                seen.push(l.rev.clone());
            }
            if doc.is_some() {
                info.losers = l.losers.clone();
            }
        }
        for s in seen {
            if !info.knows(&s) && !info.seen.contains(&s) && forget.as_ref() != Some(&s) {
                info.seen.push(s);
            }
        }
        for loser in &losers {
            if !info.losers.iter().any(|l| l.rev == loser.rev)
                && forget.as_ref() != Some(&loser.rev)
            {
                info.losers.push(Loser::of(loser));
            }
        }
        // Only the leaves that still stand are worth their rank.
        info.losers
            .retain(|l| listed_revs.contains(&l.rev) && l.rev != info.rev);
        info.seen.truncate(HISTORY);
        if doc.is_none() && local == Some(&info) {
            continue;
        }
        out.push(Pulled {
            id,
            doc: doc.unwrap_or(Value::Null),
            info,
        });
    }
    (out, again)
}
