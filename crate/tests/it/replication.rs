//! Issue 21: the replication core — revisions, the merge rule, and the protocol's steps as the
//! `Replicator` asks for them (the real server is met by `tests/browser/sync.mjs`).

use palaver::replication::*;
use proptest::prelude::*;
use serde_json::{json, Value};
use std::collections::HashMap;

fn body(text: &str, stamp: f64) -> Value {
    json!({"type": "message", "text": text, "updated_at": stamp})
}

#[test]
fn equal_changes_make_equal_revisions_and_a_change_descends_from_its_parent() {
    let first = next_revision(None, Some(&body("a", 1.0)));
    assert!(first.rev.starts_with("1-"));
    assert_eq!(first, next_revision(None, Some(&body("a", 1.0))));
    let second = next_revision(Some(&first), Some(&body("b", 2.0)));
    assert!(second.rev.starts_with("2-"));
    assert!(second.knows(&first.rev), "the parent is in the history");
    assert!(!first.knows(&second.rev));
    assert_eq!(choose("msg:c:m", Some(&first), &second), Choice::Take);
    assert_eq!(choose("msg:c:m", Some(&second), &first), Choice::Known);
    let removed = next_revision(Some(&second), None);
    assert!(removed.deleted);
    assert_ne!(removed.rev, second.rev);
}

#[test]
fn a_local_change_keeps_the_losing_leaves_seen() {
    let mut winner = next_revision(None, Some(&body("a", 1.0)));
    winner.seen = vec!["1-loser".to_string()];
    let edited = next_revision(Some(&winner), Some(&body("b", 2.0)));
    assert!(
        edited.knows("1-loser"),
        "a leaf seen is not fetched again after an edit"
    );
    assert!(edited.knows(&winner.rev));
    assert!(!edited.knows("1-other"));
}

#[test]
fn between_branches_a_message_keeps_couchdbs_winner_and_an_edit_beats_a_removal() {
    let base = next_revision(None, Some(&body("a", 1.0)));
    let edited = next_revision(Some(&base), Some(&body("edited", 2.0)));
    let removed = next_revision(Some(&base), None);
    assert_eq!(choose("msg:c:m", Some(&removed), &edited), Choice::Take);
    assert_eq!(choose("msg:c:m", Some(&edited), &removed), Choice::Keep);
    let other = next_revision(Some(&base), Some(&body("other", 3.0)));
    let a = choose("msg:c:m", Some(&edited), &other);
    let b = choose("msg:c:m", Some(&other), &edited);
    assert_ne!(a, b, "exactly one side takes the other's: {a:?} {b:?}");
    let longer = next_revision(Some(&edited), Some(&body("again", 0.5)));
    assert_eq!(
        choose("msg:c:m", Some(&other), &longer),
        Choice::Take,
        "the longer history wins"
    );
}

#[test]
fn a_chat_conflict_takes_the_newest_update() {
    let base = next_revision(None, Some(&body("t", 1.0)));
    let older_but_longer = next_revision(
        Some(&next_revision(Some(&base), Some(&body("x", 2.0)))),
        Some(&body("y", 3.0)),
    );
    let newest = next_revision(Some(&base), Some(&body("z", 9.0)));
    assert_eq!(
        choose("chat:c", Some(&older_but_longer), &newest),
        Choice::Take
    );
    assert_eq!(
        choose("chat:c", Some(&newest), &older_but_longer),
        Choice::Keep
    );
}

#[test]
fn received_history_is_read_from_revisions() {
    let doc = json!({"_id": "msg:c:m", "_rev": "3-ccc", "_revisions": {"start": 3, "ids": ["ccc", "bbb", "aaa"]}, "type": "message"});
    let info = info_of(&doc).expect("a revision");
    assert!(info.knows("2-bbb") && info.knows("1-aaa") && !info.knows("2-zzz"));
    let bad = json!({"_id": "x", "_rev": "3-ccc", "_revisions": {"start": 2, "ids": ["nope"]}});
    assert_eq!(
        info_of(&bad).map(|i| i.ancestry),
        Some(vec!["ccc".to_string()]),
        "a history that does not match the revision is not believed"
    );
    assert!(info_of(&json!({"_id": "x", "_rev": "bad"})).is_none());
    assert_eq!(body_of(&doc), json!({"type": "message"}));
}

proptest! {
    /// The merge rule converges: whatever order the leaves of a document arrive in, every
    /// replica ends with the same revision.
    #[test]
    fn every_order_of_arrival_ends_on_the_same_revision(
        texts in proptest::collection::vec(("[a-c]{1,2}", 0u8..4, any::<bool>()), 2..6),
        chat in any::<bool>(),
        order in proptest::collection::vec(any::<proptest::sample::Index>(), 6),
    ) {
        let id = if chat { "chat:c" } else { "msg:c:m" };
        let base = next_revision(None, Some(&body("base", 0.0)));
        let mut leaves = Vec::new();
        for (text, depth, deleted) in &texts {
            let mut rev = base.clone();
            for d in 0..=*depth {
                let b = if *deleted && d == *depth { None } else { Some(body(&format!("{text}{d}"), f64::from(*depth) + text.len() as f64)) };
                rev = next_revision(Some(&rev), b.as_ref());
            }
            leaves.push(rev);
        }
        let fold = |leaves: &[RevInfo]| {
            let mut current = base.clone();
            for leaf in leaves {
                if choose(id, Some(&current), leaf) == Choice::Take {
                    current = leaf.clone();
                }
            }
            current.rev
        };
        let mut shuffled = leaves.clone();
        for (i, pick) in order.iter().enumerate() {
            let n = shuffled.len();
            shuffled.swap(i % n, pick.index(n));
        }
        prop_assert_eq!(fold(&leaves), fold(&shuffled));
    }
}

/// The requests of one replication, answered as a CouchDB server would.
struct Run {
    r: Replicator,
    now: u64,
}

impl Run {
    fn new() -> Self {
        Run {
            r: Replicator::new("device-1"),
            now: 1000,
        }
    }

    fn input(&mut self, input: SyncInput) -> Vec<SyncEffect> {
        self.now += 1;
        self.r.handle(self.now, input)
    }

    fn http(effects: &[SyncEffect]) -> Option<HttpRequest> {
        effects.iter().find_map(|e| match e {
            SyncEffect::Http(h) => Some(h.clone()),
            _ => None,
        })
    }

    fn reply(&mut self, effects: &[SyncEffect], status: u16, body: Value) -> Vec<SyncEffect> {
        let request = Self::http(effects).expect("a request");
        self.input(SyncInput::Reply {
            id: request.id,
            status,
            body,
        })
    }
}

fn path(effects: &[SyncEffect]) -> String {
    Run::http(effects)
        .map(|h| h.path)
        .unwrap_or_else(|| format!("{effects:?}"))
}

#[test]
fn a_cycle_pushes_what_the_server_lacks_pulls_what_is_unknown_and_checkpoints() {
    let mut run = Run::new();
    let e = run.input(SyncInput::Start {
        checkpoint: Some(json!(7)),
    });
    assert_eq!(path(&e), "");
    let e = run.reply(&e, 200, json!({"db_name": "chats"}));
    assert_eq!(path(&e), "_local/device-1");
    let e = run.reply(
        &e,
        200,
        json!({"_id": "_local/device-1", "_rev": "0-3", "last_seq": 7}),
    );
    assert!(matches!(e[0], SyncEffect::ReadOutbox { .. }), "{e:?}");
    let entry = |id: &str, text: &str| OutboxEntry {
        id: id.into(),
        mark: 1.0,
        body: Some(body(text, 1.0)),
        known: None,
    };
    let e = run.input(SyncInput::Outbox {
        entries: vec![entry("msg:c:a", "a"), entry("msg:c:b", "b")],
    });
    let diff = Run::http(&e).expect("revs_diff");
    assert_eq!(diff.path, "_revs_diff");
    let rev_a = diff
        .body
        .as_ref()
        .and_then(|b| b["msg:c:a"][0].as_str())
        .unwrap_or_default()
        .to_string();
    let rev_b = diff
        .body
        .as_ref()
        .and_then(|b| b["msg:c:b"][0].as_str())
        .unwrap_or_default()
        .to_string();
    // The server has `a` already (another device made the same change): only `b` is sent.
    let e = run.reply(&e, 200, json!({"msg:c:b": {"missing": [rev_b]}}));
    let send = Run::http(&e).expect("bulk_docs");
    assert_eq!(send.path, "_bulk_docs");
    let docs = send
        .body
        .as_ref()
        .map(|b| b["docs"].clone())
        .unwrap_or_default();
    assert_eq!(docs.as_array().map(Vec::len), Some(1));
    assert_eq!(docs[0]["_id"], "msg:c:b");
    assert_eq!(
        send.body.as_ref().map(|b| b["new_edits"].clone()),
        Some(json!(false))
    );
    assert_eq!(docs[0]["_revisions"]["start"], 1);
    let e = run.reply(&e, 201, json!([]));
    let Some(SyncEffect::Store { pushed, .. }) =
        e.iter().find(|e| matches!(e, SyncEffect::Store { .. }))
    else {
        panic!("{e:?}")
    };
    assert_eq!(
        pushed
            .iter()
            .map(|p| p.info.rev.clone())
            .collect::<Vec<_>>(),
        vec![rev_a.clone(), rev_b]
    );
    let e = run.input(SyncInput::Stored);
    assert!(
        matches!(e[0], SyncEffect::ReadOutbox { .. }),
        "the outbox again until empty: {e:?}"
    );
    let e = run.input(SyncInput::Outbox { entries: vec![] });
    assert_eq!(
        path(&e),
        "_changes?style=all_docs&limit=200&since=7",
        "resumed from the agreed checkpoint"
    );
    let e = run.reply(
        &e,
        200,
        json!({"results": [
        {"id": "msg:c:a", "seq": 8, "changes": [{"rev": rev_a}]},
        {"id": "msg:c:z", "seq": 9, "changes": [{"rev": "1-zz"}, {"rev": "2-yy"}]},
        {"id": "_design/x", "seq": 10, "changes": [{"rev": "1-d"}]}
    ], "last_seq": 10}),
    );
    let Some(SyncEffect::ReadKnown { ids }) = e.first() else {
        panic!("{e:?}")
    };
    assert_eq!(
        ids,
        &vec!["msg:c:a".to_string(), "msg:c:z".to_string()],
        "design docs are not ours"
    );
    let known_a = next_revision(None, Some(&body("a", 1.0)));
    let e = run.input(SyncInput::Known {
        known: HashMap::from([("msg:c:a".to_string(), known_a)]),
        pending: vec![],
    });
    let get = Run::http(&e).expect("bulk_get");
    assert_eq!(get.path, "_bulk_get?revs=true");
    assert_eq!(
        get.body,
        Some(json!({"docs": [{"id": "msg:c:z", "rev": "1-zz"}, {"id": "msg:c:z", "rev": "2-yy"}]}))
    );
    let e = run.reply(&e, 200, json!({"results": [
        {"id": "msg:c:z", "docs": [{"ok": {"_id": "msg:c:z", "_rev": "1-zz", "_revisions": {"start": 1, "ids": ["zz"]}, "text": "one"}}]},
        {"id": "msg:c:z", "docs": [{"ok": {"_id": "msg:c:z", "_rev": "2-yy", "_revisions": {"start": 2, "ids": ["yy", "xx"]}, "text": "two"}}]}
    ]}));
    let Some(SyncEffect::Store { pulled, .. }) =
        e.iter().find(|e| matches!(e, SyncEffect::Store { .. }))
    else {
        panic!("{e:?}")
    };
    assert_eq!(pulled.len(), 1);
    assert_eq!(pulled[0].doc["text"], "two", "the longer branch wins");
    assert_eq!(
        pulled[0].info.seen,
        vec!["1-zz".to_string()],
        "the loser is remembered, not fetched again"
    );
    let e = run.input(SyncInput::Stored);
    let put = Run::http(&e).expect("checkpoint");
    assert_eq!(put.path, "_local/device-1");
    assert_eq!(
        put.body,
        Some(json!({"last_seq": 10, "replicator": "palaver", "_rev": "0-3"}))
    );
    let e = run.reply(&e, 201, json!({"ok": true, "rev": "0-4"}));
    assert!(e.iter().any(|e| *e
        == SyncEffect::Checkpoint {
            last_seq: json!(10)
        }));
    assert_eq!(path(&e), "_changes?style=all_docs&limit=200&since=10");
    let e = run.reply(&e, 200, json!({"results": [], "last_seq": 10}));
    let wait = Run::http(&e).expect("longpoll");
    assert!(wait.wait && wait.path.contains("feed=longpoll"));
    assert_eq!(run.r.status().state, "live");
    assert_eq!(run.r.status().pushed, 1);
    assert_eq!(run.r.status().pulled, 1);
    // A local change cuts the wait short and pushes.
    let e = run.input(SyncInput::LocalChange);
    assert_eq!(e[0], SyncEffect::Abort { id: wait.id });
    assert!(matches!(e[1], SyncEffect::ReadOutbox { .. }));
    // The aborted request's late answer is ignored.
    let late = run.input(SyncInput::Reply {
        id: wait.id,
        status: 200,
        body: json!({"results": [], "last_seq": 99}),
    });
    assert!(Run::http(&late).is_none());
}

#[test]
fn a_checkpoint_the_two_sides_do_not_share_starts_from_the_beginning() {
    let mut run = Run::new();
    let e = run.input(SyncInput::Start {
        checkpoint: Some(json!(5)),
    });
    let e = run.reply(&e, 200, json!({"db_name": "chats"}));
    run.reply(&e, 404, json!({"error": "not_found"}));
    let e = run.input(SyncInput::Outbox { entries: vec![] });
    assert!(path(&e).ends_with("since=0"), "{}", path(&e));
}

#[test]
fn refusals_stop_with_a_clear_error_and_failures_retry_with_backoff() {
    let mut run = Run::new();
    let e = run.input(SyncInput::Start { checkpoint: None });
    run.reply(
        &e,
        401,
        json!({"error": "unauthorized", "reason": "Name or password is incorrect."}),
    );
    assert_eq!(run.r.status().state, "stopped");
    assert!(matches!(
        run.r.status().error,
        Some(SyncError::Unauthorized { .. })
    ));

    let e = run.input(SyncInput::Start { checkpoint: None });
    run.reply(&e, 200, Value::Null);
    assert!(
        matches!(run.r.status().error, Some(SyncError::NotCouchDb { .. })),
        "an HTML page is not a database"
    );
    let e = run.input(SyncInput::Start { checkpoint: None });
    run.reply(&e, 404, Value::Null);
    assert!(
        matches!(run.r.status().error, Some(SyncError::NotCouchDb { .. })),
        "a bare 404 is not CouchDB's"
    );
    let e = run.input(SyncInput::Start { checkpoint: None });
    run.reply(&e, 404, json!({"error": {"code": "NotFound"}}));
    assert!(
        matches!(run.r.status().error, Some(SyncError::NotCouchDb { .. })),
        "another server's JSON 404 is not CouchDB's"
    );

    let e = run.input(SyncInput::Start { checkpoint: None });
    let e = run.reply(
        &e,
        404,
        json!({"error": "not_found", "reason": "Database does not exist."}),
    );
    let create = Run::http(&e).expect("create");
    assert_eq!((create.method, create.path.as_str()), (Method::Put, ""));
    run.reply(&e, 403, json!({"reason": "no"}));
    assert!(matches!(
        run.r.status().error,
        Some(SyncError::Forbidden { .. })
    ));

    let e = run.input(SyncInput::Start { checkpoint: None });
    let id = Run::http(&e).map(|h| h.id).unwrap_or_default();
    let e = run.input(SyncInput::Failed {
        id,
        reason: "Failed to fetch".into(),
    });
    assert_eq!(run.r.status().state, "retrying");
    let Some(SyncEffect::Wake { at }) = e
        .iter()
        .find(|e| matches!(e, SyncEffect::Wake { .. }))
        .cloned()
    else {
        panic!("{e:?}")
    };
    assert!(
        run.input(SyncInput::Tick)
            .iter()
            .all(|e| !matches!(e, SyncEffect::Http(_))),
        "not before its time"
    );
    run.now = at;
    let e = run.input(SyncInput::Tick);
    assert_eq!(path(&e), "", "tries again from the start");
    let e = run.input(SyncInput::Online { online: false });
    assert!(matches!(e[0], SyncEffect::Abort { .. }));
    assert_eq!(run.r.status().state, "offline");
    let e = run.input(SyncInput::Online { online: true });
    assert_eq!(path(&e), "");
}

#[test]
fn a_doc_with_unpushed_changes_is_pushed_before_its_remote_revisions_are_taken() {
    let mut run = Run::new();
    let e = run.input(SyncInput::Start { checkpoint: None });
    let e = run.reply(&e, 200, json!({"db_name": "d"}));
    run.reply(&e, 404, json!({"error": "not_found"}));
    let e = run.input(SyncInput::Outbox { entries: vec![] });
    let e = run.reply(&e, 200, json!({"results": [{"id": "chat:c", "seq": 1, "changes": [{"rev": "2-r"}]}], "last_seq": 1}));
    assert!(matches!(e[0], SyncEffect::ReadKnown { .. }));
    let e = run.input(SyncInput::Known {
        known: HashMap::new(),
        pending: vec!["chat:c".into()],
    });
    assert!(
        matches!(e[0], SyncEffect::ReadOutbox { .. }),
        "the local change goes first: {e:?}"
    );
}

#[test]
fn stored_records_and_documents_map_both_ways_and_only_synced_fields_leave() {
    let record = json!({"chat_id": "c:1", "message_id": "m:2", "position": 3.5, "message": {"role": "user", "content": "hi"}});
    let mut doc = message_doc(&record);
    doc["_id"] = json!(message_doc_id("c:1", "m:2"));
    doc["_rev"] = json!("1-a");
    assert_eq!(
        local_doc(&doc),
        Some(LocalDoc::Message {
            chat_id: "c:1".into(),
            message_id: "m:2".into(),
            record: Some(record)
        }),
        "ids holding ':' come back from the body"
    );
    let gone = json!({"_id": "msg:c:m", "_rev": "2-b", "_deleted": true});
    assert_eq!(
        local_doc(&gone),
        Some(LocalDoc::Message {
            chat_id: "c".into(),
            message_id: "m".into(),
            record: None
        })
    );
    let chat = chat_doc(
        "c",
        &json!({"id": "c", "title": "T", "thread": {"title": "T"}, "updated_at": 5, "draft": {"secret": 1}, "version": 9, "message_count": 4}),
    );
    assert_eq!(
        chat,
        json!({"type": "chat", "chat_id": "c", "title": "T", "thread": {"title": "T"}, "updated_at": 5}),
        "the draft, version and count stay here"
    );
    let mut chat_doc_json = chat.clone();
    chat_doc_json["_id"] = json!(chat_doc_id("c"));
    assert_eq!(
        local_doc(&chat_doc_json),
        Some(LocalDoc::Chat {
            chat_id: "c".into(),
            fields: Some(chat)
        })
    );
    assert_eq!(
        local_doc(&json!({"_id": "chat:c", "_deleted": true})),
        Some(LocalDoc::Chat {
            chat_id: "c".into(),
            fields: None
        })
    );
    assert_eq!(local_doc(&json!({"_id": "_design/x"})), None);
}
