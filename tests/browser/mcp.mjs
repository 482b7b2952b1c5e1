// Issue 17 in the page: the user's MCP servers — real ones from npm (server-everything,
// server-memory, pinned in tests/mcp/) and one that adds a tool later (tests/mcp/faulty.mjs) —
// run by the real `palaver serve` from its --mcp file. The provider double plays the model: it
// calls an MCP tool; the approval card names the server; the user approves; the result (text, an
// image, progress) reaches the next request. A tool that appears later reaches the engine without
// a reload; a resource is attached to a message; a prompt is inserted from the `/` menu; Settings
// show each server's state.
// node tests/browser/mcp.mjs   (after build_pkg, `cargo build` and `npm ci` in tests/mcp)
import { writeFile, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import {
  root, check, failed, watchdog, startDouble, startServe, launch, tempDir, cleanup, openaiStream, setProvider, waitIdle,
} from './harness.mjs';
import { inThemes } from './axe.mjs';

watchdog(300, 'the MCP page test');
const servers = join(root, 'tests/mcp/node_modules/@modelcontextprotocol');
const workspace = await tempDir('palaver-mcp-ws-');
const home = await tempDir('palaver-mcp-home-');
await mkdir(join(home, 'cfg'), { recursive: true });
const config = join(home, 'cfg', 'mcp.json');
await writeFile(config, JSON.stringify({
  mcpServers: {
    // Its read-only hints are believed because this config says so (SECURITY F8).
    everything: { command: 'node', args: [join(servers, 'server-everything/dist/index.js'), 'stdio'], trust_annotations: true },
    memory: { command: 'node', args: [join(servers, 'server-memory/dist/index.js')], env: { MEMORY_FILE_PATH: join(home, 'memory.jsonl') } },
    changes: { command: 'node', args: [join(root, 'tests/mcp/faulty.mjs'), 'changes'], env: { FAULTY_DELAY_MS: '45000' } },
  },
}));
const double = await startDouble();
const serve = await startServe(workspace, ['--mcp', config]);
const profile = await tempDir('palaver-mcp-profile-');
const context = await launch(profile);
const pageErrors = [];
const sse = (body) => ({ body, headers: { 'content-type': 'text/event-stream' } });
const apiTools = async () => (await fetch(`${serve.origin}/api/tools`, { headers: { authorization: `Bearer ${serve.token}` } })).json();
const posts = async (id) => (await double.log(id)).filter((e) => e.method === 'POST');

try {
  const page = await context.newPage();
  page.on('pageerror', (e) => pageErrors.push(e.message));
  await page.goto(serve.printed);
  await page.click('[data-testid=settings]');
  await page.click('[data-testid=settings-tab-workspace]');
  await page.waitForFunction(() => document.querySelectorAll('[data-testid=mcp-server][data-state=ready]').length === 3, null, { timeout: 60_000 });
  await inThemes(page, 'Settings → Workspace with MCP servers', 'mcp-settings');
  const listed = await page.locator('[data-testid=mcp-server]').allTextContents();
  check(listed.length === 3 && listed.every((t) => /ready/.test(t) && /tools/.test(t)), `Settings show each MCP server, with its tools (${listed.map((t) => t.slice(0, 40)).join(' | ')})`);
  await page.click('[data-testid=settings-tab-agent]');
  check(await page.locator('[data-testid="policy-mcp__memory__create_entities"]').inputValue() === 'ask', 'an MCP tool asks by default');
  check(await page.locator('[data-testid="policy-mcp__memory__read_graph"]').inputValue() === 'ask', 'a tool its server calls read-only still asks when the config does not trust that server (F8)');
  check(await page.locator('[data-testid="policy-mcp__everything__trigger-long-running-operation"]').inputValue() === 'auto', 'and runs without asking when it does (trust_annotations)');
  await inThemes(page, 'Settings → Agent with MCP tools', 'mcp-agent-rules');
  await page.click('[data-testid=cancel-settings]');

  // The model calls a tool of the memory server: the card names the server; approved, it runs.
  const url = await double.script('mcp', [
    sse(openaiStream({ toolCalls: [{ id: 'call_mem', name: 'mcp__memory__create_entities', args: { entities: [{ name: 'Palaver', entityType: 'project', observations: ['runs in the page'] }] } }] })),
    sse(openaiStream({ text: 'I will remember that.' })),
  ]);
  await setProvider(page, { baseUrl: url, key: 'sk-mcp-test', model: 'gpt-4o' });
  const first = await posts('mcp');
  await page.fill('[data-testid=composer]', 'Remember that Palaver runs in the page.');
  await page.click('[data-testid=send]');
  await page.waitForSelector('[data-testid=tool-approval]');
  const approval = await page.textContent('[data-testid=tool-approval]');
  await inThemes(page, 'an MCP tool\'s approval', 'mcp-approval');
  check(approval.includes('create_entities of the MCP server memory'), `the approval card names the MCP server (${approval.slice(0, 120)})`);
  await page.screenshot({ path: join(process.env.PALAVER_SHOTS ?? profile, 'mcp-approval.png') });
  await page.click('[data-testid=approve]');
  await waitIdle(page, 1, 30_000);
  const requests = (await posts('mcp')).slice(first.length);
  const offered = (requests[0]?.body.tools ?? []).map((t) => t.function.name);
  check(offered.includes('mcp__memory__create_entities') && offered.includes('mcp__everything__echo') && offered.includes('read_file'), `the MCP servers' tools are offered beside the workspace tools (${offered.length} tools)`);
  const result = requests[1]?.body.messages.find((m) => m.role === 'tool');
  check(result?.content.includes('runs in the page'), `the tool's result reaches the model (${String(result?.content).slice(0, 80)})`);

  // An image from a tool reaches the model as an image (OpenAI: a user message after the results).
  await double.script('mcp', [
    sse(openaiStream({ toolCalls: [{ id: 'call_img', name: 'mcp__everything__get-tiny-image', args: {} }] })),
    sse(openaiStream({ text: 'That is the MCP logo.' })),
  ]);
  let before = (await posts('mcp')).length;
  await page.fill('[data-testid=composer]', 'Show me the image.');
  await page.click('[data-testid=send]');
  if (await page.waitForSelector('[data-testid=tool-approval]', { timeout: 3000 }).catch(() => null)) await page.click('[data-testid=approve]');
  await waitIdle(page, 2, 30_000);
  const imageRequest = (await posts('mcp'))[before + 1]?.body;
  const imageMessage = imageRequest?.messages.find((m) => m.role === 'user' && Array.isArray(m.content) && m.content.some((p) => p.type === 'image_url'));
  check(imageMessage?.content.some((p) => p.image_url?.url.startsWith('data:image/png;base64,')), 'an image a tool returned reaches the model as an image');
  // And the person sees it too, in the call's activity (not "[image: image/png]").
  const shownImage = await page.locator('[data-testid=tool-image]').last().evaluate((img) => ({ src: img.src.slice(0, 22), loaded: img.complete && img.naturalWidth > 0 })).catch(() => null);
  check(shownImage?.src === 'data:image/png;base64,' && shownImage.loaded, `the image a tool returned is shown in its call (${JSON.stringify(shownImage)})`);

  // Progress of a long call shows while it runs, like run_command's lines.
  await double.script('mcp', [
    sse(openaiStream({ toolCalls: [{ id: 'call_long', name: 'mcp__everything__trigger-long-running-operation', args: { duration: 6, steps: 3 } }] })),
    sse(openaiStream({ text: 'Done.' })),
  ]);
  await page.fill('[data-testid=composer]', 'Run the long operation.');
  await page.click('[data-testid=send]');
  // Read-only by its server's word, which the user's config trusts: it runs without asking.
  const progress = await page.waitForFunction(() => /progress [12]\/3/.test(document.querySelector('[data-tool="mcp__everything__trigger-long-running-operation"] [data-testid=tool-progress]')?.textContent ?? ''), null, { timeout: 15_000 }).then(() => true, () => false);
  check(progress, 'the call\'s progress shows in the activity block while it runs');
  await waitIdle(page, 3, 30_000);

  // A tool the server adds later (tools/list_changed) reaches the engine without a reload, and
  // Settings → Agent, open while it arrives, lists it beside the rules drawn before, which stay
  // the same elements (a select a person has open stays open) with what the person chose.
  check(!(await apiTools()).some((t) => t.name === 'mcp__changes__late'), 'the late tool is not listed yet when Settings → Agent opens (else raise FAULTY_DELAY_MS)');
  await page.click('[data-testid=settings]');
  await page.click('[data-testid=settings-tab-agent]');
  const chosen = page.locator('[data-testid=policy-read_file]');
  await chosen.selectOption('deny');
  const chosenHandle = await chosen.elementHandle();
  const listedLate = await page.waitForSelector('[data-testid="policy-mcp__changes__late"]', { timeout: 60_000 }).then(() => true, () => false);
  check(listedLate, 'Settings → Agent, open, lists the tool the server added');
  check(await chosenHandle.evaluate((select) => select.isConnected && select.value === 'deny'), 'the rule chosen before stays the same select, still set as chosen');
  await page.click('[data-testid=cancel-settings]');
  const late = await (async () => {
    for (let i = 0; i < 60; i += 1) {
      if ((await apiTools()).some((t) => t.name === 'mcp__changes__late')) return true;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    return false;
  })();
  check(late, 'palaver serve lists the tool the server added');
  await double.script('mcp', [sse(openaiStream({ text: 'I see a new tool.' }))]);
  await page.waitForTimeout(2000); // the page hears the change on its events stream, then asks /api/tools
  before = (await posts('mcp')).length;
  await page.fill('[data-testid=composer]', 'Which tools do you have now?');
  await page.click('[data-testid=send]');
  await waitIdle(page, 4, 30_000);
  const lateTools = ((await posts('mcp'))[before]?.body.tools ?? []).map((t) => t.function.name);
  check(lateTools.includes('mcp__changes__late'), `the next request offers it (the page followed the change) (${lateTools.length} tools, ${lateTools.filter((n) => n.startsWith('mcp__changes')).join(' ')})`);

  // A resource attached to a message goes as context.
  await double.script('mcp', [sse(openaiStream({ text: 'Read it.' }))]);
  await page.click('[data-testid=attach-resource]');
  await page.waitForSelector('[data-testid=resource-option]');
  await page.locator('[data-testid=resource-option]', { hasText: 'architecture.md' }).first().click();
  await page.waitForSelector('[data-testid=chip-resource][data-state=ready]');
  before = (await posts('mcp')).length;
  await page.fill('[data-testid=composer]', 'Summarize the attached document.');
  await page.click('[data-testid=send]');
  await waitIdle(page, 5, 30_000);
  const withResource = JSON.stringify((await posts('mcp'))[before]?.body.messages ?? []);
  check(withResource.includes('everything: demo://resource/static/document/architecture.md') && /Architecture/i.test(withResource), 'an attached MCP resource reaches the model as context');

  // A prompt from the `/` menu, with its argument.
  await page.fill('[data-testid=composer]', '');
  await page.type('[data-testid=composer]', '/args');
  await page.waitForSelector('[data-testid=prompt-option]');
  await page.click('[data-testid=prompt-option][data-name=args-prompt]');
  await page.fill('[data-testid=prompt-arg-city]', 'Paris');
  await page.click('[data-testid=prompt-insert]');
  await page.waitForFunction(() => document.querySelector('[data-testid=composer]').value.includes('Paris'));
  check((await page.inputValue('[data-testid=composer]')).includes('Paris'), `a prompt with its argument is inserted from the / menu (${await page.inputValue('[data-testid=composer]')})`);
  await page.click('[data-testid=settings]');
  await page.click('[data-testid=settings-tab-workspace]');
  await page.screenshot({ path: join(process.env.PALAVER_SHOTS ?? profile, 'mcp-settings.png') });
  check(pageErrors.length === 0, `no page errors (${pageErrors.join('; ')})`);
} finally {
  await context.close();
  serve.child.kill('SIGTERM');
  double.child.kill();
  await cleanup(workspace, home, profile);
}
process.exit(failed() ? 1 : 0);
