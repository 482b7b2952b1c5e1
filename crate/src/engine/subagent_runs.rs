//! The engine's side of subagents: the spawn and wait requests of chats' engine tools performed,
//! children started and stopped, finished answers handed to waiting parents, parents' trees
//! refreshed. Runs after every input until nothing moves.

use super::*;

impl Engine {
    /// Performs what the chats' engine tools asked (spawn, wait), starts queued subagents, hands
    /// finished ones' answers to their parents, and refreshes each parent's subagent tree. Runs
    /// after every input until nothing moves (each pass consumes a request, ends a link or starts
    /// one, so it stops).
    pub(super) fn settle_subagents(&mut self, now: u64, step: &mut Step) {
        if self.subagents.links().next().is_none()
            && !self.sessions.values().any(ChatSession::has_agent_requests)
        {
            return;
        }
        for _ in 0..1_000 {
            let mut moved = false;
            let asking: Vec<String> = self
                .sessions
                .iter()
                .filter(|(_, s)| s.has_agent_requests())
                .map(|(id, _)| id.clone())
                .collect();
            for parent in asking {
                let requests = self
                    .sessions
                    .get_mut(&parent)
                    .map(ChatSession::take_agent_requests)
                    .unwrap_or_default();
                for request in requests {
                    moved = true;
                    self.agent_request(now, &parent, request, step);
                }
            }
            moved |= self.collect_finished(now, step);
            moved |= self.answer_waiting_parents(now, step);
            for child in self.subagents.ready_to_start() {
                moved = true;
                self.start_child(now, &child, step);
            }
            if !moved {
                break;
            }
        }
        self.refresh_subagent_views(now, step);
    }

    fn agent_request(&mut self, now: u64, parent: &str, request: AgentRequest, step: &mut Step) {
        match request {
            AgentRequest::Spawn {
                call_id,
                task,
                title,
                tools,
                model,
                wait,
            } => self.spawn(now, parent, &call_id, task, title, tools, model, wait, step),
            AgentRequest::Wait { call_id, agent_ids } => {
                self.wait_agents(now, parent, &call_id, &agent_ids, step)
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn spawn(
        &mut self,
        now: u64,
        parent: &str,
        call_id: &str,
        task: String,
        title: Option<String>,
        tools: Option<Vec<String>>,
        model: Option<String>,
        wait: bool,
        step: &mut Step,
    ) {
        let Some(session) = self.sessions.get(parent) else {
            return;
        };
        let parent_thread = session.thread.clone();
        let root = parent_thread
            .root_chat_id
            .clone()
            .unwrap_or_else(|| parent.to_string());
        let parent_tools: Vec<String> = session
            .offered_tools(&self.config)
            .into_iter()
            .filter(|t| crate::tools::EngineTool::from_name(&t.name).is_none())
            .map(|t| t.name)
            .collect();
        if let Some(reason) = subagents::refusal(
            &parent_thread,
            self.subagents.count_for_root(&root),
            tools.as_deref(),
            &parent_tools,
        ) {
            return self.answer_call(now, parent, call_id, ToolOutcome::failed(reason), step);
        }
        let mut child = subagents::child_id(parent, call_id);
        while self.sessions.contains_key(&child) || self.subagents.get(&child).is_some() {
            child.push('_');
        }
        let title = title.unwrap_or_else(|| subagents::title_of(&task));
        let thread = subagents::child_thread(parent, &parent_thread, &title, tools, model);
        self.sessions
            .insert(child.clone(), ChatSession::new_linked(&child, thread));
        self.subagents.add(Link {
            child: child.clone(),
            parent: parent.to_string(),
            root,
            call_id: call_id.to_string(),
            task: task.clone(),
            title: title.clone(),
            wait,
            status: LinkStatus::Queued,
            outcome: None,
            delivered: false,
            started_at_ms: now,
            ended_at_ms: None,
            order: 0,
            resumed: false,
        });
        let spawned = Event::SubagentSpawned {
            parent: parent.to_string(),
            child: child.clone(),
            tool_call_id: call_id.to_string(),
            title: title.clone(),
            task,
        };
        self.to_chat(now, parent, step, |s, _| s.emit(spawned));
        if !wait {
            let started = format!(
                "Started subagent `{child}` ({title}); it works while you go on. Call wait_agents to get its answer."
            );
            self.answer_call(now, parent, call_id, ToolOutcome::ok(started), step);
        }
    }

    fn start_child(&mut self, now: u64, child: &str, step: &mut Step) {
        let Some(link) = self.subagents.get_mut(child) else {
            return;
        };
        link.status = LinkStatus::Running;
        link.started_at_ms = now;
        let command = subagents::task_command(link);
        self.command(now, child, command, step);
    }

    /// `wait_agents`: answered at once when every subagent named is over; otherwise the parent's
    /// turn waits for the rest (and gets what is over already now).
    fn wait_agents(
        &mut self,
        now: u64,
        parent: &str,
        call_id: &str,
        ids: &[String],
        step: &mut Step,
    ) {
        let mine: Vec<String> = self
            .subagents
            .children_of(parent)
            .into_iter()
            .filter(|l| !l.wait && (!ids.is_empty() || !l.delivered))
            .map(|l| l.child.clone())
            .collect();
        let unknown: Vec<&String> = ids.iter().filter(|id| !mine.contains(id)).collect();
        if !unknown.is_empty() {
            let reason = format!(
                "wait_agents: no subagent started with wait: false is called {}. Yours: {}.",
                unknown
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                if mine.is_empty() {
                    "none".to_string()
                } else {
                    mine.join(", ")
                }
            );
            return self.answer_call(now, parent, call_id, ToolOutcome::failed(reason), step);
        }
        let wanted = if ids.is_empty() { mine } else { ids.to_vec() };
        if wanted.is_empty() {
            let none = ToolOutcome::ok("There are no subagents to wait for.".to_string());
            return self.answer_call(now, parent, call_id, none, step);
        }
        let (over, open): (Vec<String>, Vec<String>) = wanted
            .into_iter()
            .partition(|id| self.subagents.get(id).is_some_and(|l| l.status.is_over()));
        let answers = self.take_answers(&over);
        if open.is_empty() {
            return self.answer_call(now, parent, call_id, ToolOutcome::ok(answers), step);
        }
        let content = format!(
            "Waiting for {} (their answers come as the next message).{}",
            open.join(", "),
            if answers.is_empty() {
                String::new()
            } else {
                format!("\n\nAlready over:\n{answers}")
            }
        );
        self.to_chat(now, parent, step, |s, ctx| {
            s.transition(
                ctx,
                Trigger::AgentsPending {
                    tool_call_id: call_id.to_string(),
                    content,
                    agents: open,
                },
            )
        });
    }

    /// The answers of these children (over), marked delivered.
    fn take_answers(&mut self, children: &[String]) -> String {
        let mut text = Vec::new();
        for child in children {
            if let Some(link) = self.subagents.get_mut(child) {
                link.delivered = true;
                if let Some(outcome) = &link.outcome {
                    text.push(subagents::result_text(link, outcome));
                }
            }
        }
        text.join("\n\n")
    }

    /// Children whose turn ended (or whose chat was closed) become over; a waiting parent's call
    /// gets the answer, or the reason as a tool error.
    fn collect_finished(&mut self, now: u64, step: &mut Step) -> bool {
        let running: Vec<String> = self
            .subagents
            .links()
            .filter(|l| l.status == LinkStatus::Running)
            .map(|l| l.child.clone())
            .collect();
        let mut moved = false;
        for child in running {
            let outcome = match self.sessions.get(&child) {
                Some(session) => {
                    match subagents::child_status(session.state(), &session.messages) {
                        Ok(_) => continue,
                        Err(outcome) => outcome,
                    }
                }
                None => Outcome {
                    status: LinkStatus::Stopped,
                    text: "The subagent's chat was closed.".into(),
                },
            };
            moved = true;
            self.end_link(now, &child, outcome, step);
        }
        moved
    }

    pub(super) fn end_link(&mut self, now: u64, child: &str, outcome: Outcome, step: &mut Step) {
        let Some(link) = self.subagents.get_mut(child) else {
            return;
        };
        link.status = outcome.status;
        link.ended_at_ms = Some(now);
        link.outcome = Some(outcome.clone());
        let link = link.clone();
        let result = Event::SubagentResult {
            parent: link.parent.clone(),
            child: link.child.clone(),
            tool_call_id: link.call_id.clone(),
            outcome: outcome.status.name().to_string(),
            text: outcome.text.clone(),
        };
        self.to_chat(now, &link.parent, step, |s, _| s.emit(result));
        if link.wait {
            if let Some(l) = self.subagents.get_mut(child) {
                l.delivered = true;
            }
            let content = subagents::result_text(&link, &outcome);
            let answer = if outcome.status == LinkStatus::Done {
                ToolOutcome::ok(content)
            } else {
                ToolOutcome::failed(content)
            };
            if self.is_late(&link.parent, &link.call_id) {
                let go_on = link.resumed;
                self.answer_late(now, &link.parent, &link.call_id, answer, go_on, step);
            } else {
                self.answer_call(now, &link.parent, &link.call_id, answer, step);
            }
        }
    }

    /// A parent left waiting by `wait_agents` whose subagents are all over gets their answers.
    fn answer_waiting_parents(&mut self, now: u64, step: &mut Step) -> bool {
        let ready: Vec<(String, Vec<String>)> = self
            .sessions
            .iter()
            .filter(|(_, s)| !s.waiting_for_agents().is_empty())
            .filter(|(_, s)| {
                s.waiting_for_agents()
                    .iter()
                    .all(|c| self.subagents.get(c).is_none_or(|l| l.status.is_over()))
            })
            .map(|(id, s)| (id.clone(), s.waiting_for_agents().to_vec()))
            .collect();
        let moved = !ready.is_empty();
        for (parent, children) in ready {
            let links: Vec<Link> = children
                .iter()
                .filter_map(|c| self.subagents.get(c).cloned())
                .collect();
            let text = subagents::answers_message(&links.iter().collect::<Vec<_>>());
            for child in &children {
                if let Some(link) = self.subagents.get_mut(child) {
                    link.delivered = true;
                }
            }
            self.to_chat(now, &parent, step, |s, ctx| {
                s.transition(ctx, Trigger::AgentsAnswered(text))
            });
        }
        moved
    }

    /// The parent was stopped: every subagent below it stops too (their partial work kept and
    /// marked); queued ones never start.
    pub(super) fn stop_subagents_of(&mut self, now: u64, parent: &str, step: &mut Step) {
        for child in self.subagents.open_descendants(parent) {
            let queued = self
                .subagents
                .get(&child)
                .is_some_and(|l| l.status == LinkStatus::Queued);
            if !queued && self.sessions.contains_key(&child) {
                self.to_chat(now, &child, step, |s, ctx| {
                    s.transition(ctx, Trigger::Abort)
                });
            }
            let text = if queued {
                "The subagent was stopped with its parent before it started."
            } else {
                "The subagent was stopped with its parent; its partial work is in its chat."
            };
            let outcome = Outcome {
                status: LinkStatus::Stopped,
                text: text.to_string(),
            };
            self.end_link(now, &child, outcome, step);
        }
    }

    fn answer_call(
        &mut self,
        now: u64,
        chat: &str,
        call_id: &str,
        outcome: ToolOutcome,
        step: &mut Step,
    ) {
        if !self.sessions.contains_key(chat) {
            return;
        }
        self.to_chat(now, chat, step, |s, ctx| {
            s.transition(
                ctx,
                Trigger::ToolResult {
                    tool_call_id: call_id.to_string(),
                    outcome,
                },
            )
        });
    }

    /// Each parent's runtime shows its children: status, model, tokens, time, approvals asked.
    fn refresh_subagent_views(&mut self, now: u64, step: &mut Step) {
        for parent in self.subagents.parents() {
            let views: Vec<_> = self
                .subagents
                .children_of(&parent)
                .into_iter()
                .map(|link| {
                    let session = self.sessions.get(&link.child);
                    let status = match (link.status, session) {
                        (LinkStatus::Running, Some(s)) => {
                            subagents::child_status(s.state(), &s.messages).unwrap_or("running")
                        }
                        (status, _) => status.name(),
                    };
                    let model =
                        session.map_or(String::new(), |s| s.answering_model(&self.config).model);
                    let tokens = session.map_or(0, |s| subagents::tokens_used(&s.messages));
                    let reasons = session.map(ChatSession::pause_reasons).unwrap_or_default();
                    subagents::view(link, status, &model, tokens, reasons)
                })
                .collect();
            let changed = self
                .sessions
                .get(&parent)
                .is_some_and(|s| s.subagents() != views.as_slice());
            if changed {
                self.to_chat(now, &parent, step, |s, _| s.set_subagents(views));
            }
        }
    }
}
