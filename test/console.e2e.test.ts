import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, type BrowserContext, chromium, type Locator, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, freePort, logLines, spawnNpmStart, waitUntilUp } from '../bench/server.ts';
import { isolatedDatabase } from './messaging-helpers.ts';
import { type Double, fakeMsg91, MSG91_AUTHKEY } from './provider-doubles.ts';
import { dialects, uniqueEmail, uniquePhone } from './helpers.ts';

/**
 * The console in a real headless Chromium (Debian's `chromium`, which .ci/run installs) against the real
 * service as `npm start` runs it, on SQLite and on PostgreSQL: each screen's main task, each role's view, Hindi,
 * axe-core on every screen, the CSP and where the token lives. Screenshots of the main screens at 360 and 1280
 * px are taken on the SQLite run (docs/console.md shows them). CHROMIUM_PATH names another browser binary;
 * without one the file is skipped, unless CONSOLE_E2E_REQUIRED=1 (.ci/run sets it), when it fails.
 */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
/** Where screenshots go: a temporary folder, or docs/console with `npm run console:screenshots`. */
const SHOTS = process.env.CONSOLE_SCREENSHOTS_DIR ?? join(tmpdir(), 'ces-console-screenshots');
const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const PASSWORD = 'correct horse battery';

interface Server {
  base: string;
  child: ChildProcess;
  lines: Array<Record<string, unknown>>;
}

async function startServer(env: Record<string, string>, at?: number): Promise<Server> {
  const port = at ?? (await freePort());
  const child = spawnNpmStart(
    {
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'info',
      QUIET_HOURS: '',
      APP_KEY: 'c'.repeat(64),
      SANDBOX_DELIVERY_DELAY_MS: '20',
      WORKER_POLL_MS: '50',
      RATE_LIMIT_PUBLIC_PER_MIN: '100000',
      RATE_LIMIT_AUTHENTICATED_PER_MIN: '100000',
      RATE_LIMIT_AUTH_PER_MIN: '100000',
      RATE_LIMIT_AUTH_IP_PER_MIN: '100000',
      RATE_LIMIT_OTP_PER_MIN: '100000',
      RATE_LIMIT_AUTH_FAILED_PER_MIN: '100000',
      ...env,
    },
    'pipe',
  );
  const lines = logLines(child);
  const base = `http://127.0.0.1:${port}`;
  await waitUntilUp(`${base}/api/readyz`);
  return { base, child, lines };
}

/** The sign-in code the sandbox provider "sent" to `phone` (its message line is the one log line with it). */
async function otpFor(server: Server, phone: string): Promise<string> {
  for (let i = 0; i < 100; i++) {
    const line = server.lines.findLast((l) => l.msg === 'sandbox message' && l.to === phone);
    const code = line && /\b(\d{6})\b/.exec(String(line.body))?.[1];
    if (code) return code;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`no code sent to ${phone}`);
}

/** axe-core on the page as it is: no serious or critical violation. */
async function accessible(page: Page, screen: string): Promise<void> {
  await page.evaluate(axeSource);
  const result = (await page.evaluate('axe.run()')) as {
    violations: Array<{ id: string; impact: string; nodes: Array<{ target: unknown }> }>;
  };
  const violations = result.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.slice(0, 3).map((n) => n.target) }));
  expect(violations, `axe on ${screen}`).toEqual([]);
}

/**
 * At 360 px wide, a stacked table's buttons (the first row's) end within the screen and its scrolling region
 * has nothing to scroll sideways; the viewport is 1280 px again after.
 */
async function buttonsInViewAt360(page: Page, table: Locator, names: string[]): Promise<void> {
  await page.setViewportSize({ width: 360, height: 740 });
  // The table's own scrolling region (the section around it carries the same name).
  const region = page.locator('div.table-wrap', { has: table });
  for (const name of names) {
    const box = await region.getByRole('button', { name }).first().boundingBox();
    expect(box, name).not.toBeNull();
    expect(box!.x + box!.width, name).toBeLessThanOrEqual(360);
  }
  expect(await region.evaluate((el) => el.scrollWidth <= el.clientWidth)).toBe(true);
  await page.setViewportSize({ width: 1280, height: 800 });
}

/** A screenshot of the page at 1280 and at 360 px wide (full page), for docs/console.md. */
async function shoot(page: Page, name: string): Promise<void> {
  mkdirSync(SHOTS, { recursive: true });
  for (const width of [1280, 360]) {
    await page.setViewportSize({ width, height: width === 360 ? 740 : 800 });
    await page.waitForTimeout(150);
    await page.screenshot({ path: join(SHOTS, `${name}-${width}.png`), fullPage: true });
  }
  await page.setViewportSize({ width: 1280, height: 800 });
}

const browserMissing = !existsSync(CHROMIUM);
if (browserMissing) {
  const why = `no Chromium at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH)`;
  if (process.env.CONSOLE_E2E_REQUIRED === '1') throw new Error(`console e2e: ${why}`);
  console.warn(`console e2e: skipped: ${why}`);
}

// The console is a client of the API, whose own tests run on both databases: its browser tests run once, on the
// embedded default (SQLite), which is what an office starts with. That keeps a CI run under its 25 minutes.
const dialect = 'sqlite' as const;
describe.runIf(!browserMissing && dialects.includes(dialect))(
  `the console in Chromium (${dialect})`,
  { timeout: 60_000 },
  () => {
    let database: Awaited<ReturnType<typeof isolatedDatabase>>;
    let dataDir: string;
    let server: Server;
    let browser: Browser;
    let msg91: Double;
    let context: BrowserContext;
    let page: Page;
    const cspViolations: string[] = [];
    const pageUrls: string[] = [];
    const owner = { email: uniqueEmail('owner'), phone: uniquePhone(), token: '' };
    const voterPhones = [uniquePhone(), uniquePhone(), uniquePhone()];

    beforeAll(async () => {
      database = await isolatedDatabase(dialect);
      dataDir = mkdtempSync(join(tmpdir(), 'ces-console-'));
      // MSG91's Flow API on loopback: an office of its own (the gateways' test) sends SMS through it.
      msg91 = await fakeMsg91();
      server = await startServer({
        DATABASE_URL: `sqlite:${join(dataDir, 'console.db')}`,
        MSG91_BASE_URL: msg91.url,
      });
      browser = await chromium.launch({
        executablePath: CHROMIUM,
        args: [
          '--headless',
          '--no-sandbox',
          '--disable-gpu',
          '--disable-quic',
          '--no-first-run',
          '--disable-background-networking',
          '--disable-component-update',
          '--disable-sync',
        ],
      });
      // The office's own screens run without the console's service worker (page.route must see every request);
      // the field test's phone has it.
      context = await browser.newContext({
        viewport: { width: 1280, height: 800 },
        locale: 'en-IN',
        serviceWorkers: 'block',
      });
      context.setDefaultTimeout(10_000);
      page = await context.newPage();
      page.on('console', (message) => {
        if (/Content.Security.Policy/i.test(message.text())) cspViolations.push(message.text());
      });
      page.on('framenavigated', (frame) => {
        if (frame === page.mainFrame()) pageUrls.push(frame.url());
      });
      page.on('dialog', (dialog) => void dialog.accept());
      const registered = await api(`${server.base}/api`, 'POST', '/auth/register', undefined, {
        name: 'Asha Rao',
        email: owner.email,
        password: PASSWORD,
        phone: owner.phone,
      });
      owner.token = registered.access_token as string;
    }, 120_000);

    afterAll(async () => {
      await browser?.close();
      server?.child.kill('SIGTERM');
      await new Promise((r) => server?.child.once('exit', r));
      await database?.drop();
      await msg91?.close();
      rmSync(dataDir, { recursive: true, force: true });
    }, 60_000);

    const go = async (path: string) => {
      await page.goto(`${server.base}/console${path}`);
    };
    const nav = (name: string | RegExp) =>
      page.getByRole('navigation', { name: /Main|मुख्य/ }).getByRole('link', { name });

    it('serves the console with a strict CSP, and / redirects to it', async () => {
      const res = await fetch(`${server.base}/`, { redirect: 'manual' });
      expect(res.status).toBe(302);
      expect(res.headers.get('location')).toBe('/console/');
      expect((await fetch(`${server.base}/console`)).status).toBe(200);
      const index = await fetch(`${server.base}/console/voters/7`);
      expect(index.status).toBe(200);
      const csp = index.headers.get('content-security-policy') ?? '';
      expect(csp).toContain("script-src 'self'");
      expect(csp).toContain("default-src 'none'");
      expect(csp).not.toContain('unsafe-inline');
      expect(index.headers.get('cache-control')).toBe('no-store');
      const html = await index.text();
      expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/); // no inline script
      const missing = await fetch(`${server.base}/console/assets/nothing.js`);
      expect(missing.status).toBe(404);
      expect(((await missing.json()) as { error_code: string }).error_code).toBe('not_found');
    });

    it('signs in with a code sent by SMS; the token is kept in sessionStorage only', async () => {
      await go('/');
      await expect.poll(() => page.url(), { timeout: 10_000 }).toContain('/console/signin');
      await accessible(page, 'sign-in');
      await shoot(page, 'signin');
      await page.getByRole('button', { name: 'Code by SMS' }).click();
      await page.getByLabel('Phone').fill(owner.phone);
      await page.getByRole('button', { name: 'Send me a code' }).click();
      await page.getByText('a code is on its way').waitFor();
      await page.getByLabel('Six-digit code').fill(await otpFor(server, owner.phone));
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('heading', { name: 'Dashboard' }).waitFor();
      // No account of the office's yet: the dashboard says that only the sandbox carries its channels.
      await page.getByText(/^Only the sandbox carries SMS, WhatsApp, Email, Voice call \(IVR\)/).waitFor();
      expect(await page.evaluate('sessionStorage.getItem("ces.token")')).toMatch(/\S{20,}/);
      const token = (await page.evaluate('sessionStorage.getItem("ces.token")')) as string;
      expect(await page.evaluate('JSON.stringify(localStorage)')).not.toContain(token);
      await expect
        .poll(() => page.getByTestId('credits-sms').textContent(), { timeout: 10_000 })
        .toMatch(/\d/);
      await accessible(page, 'dashboard');
    });

    it('imports a roll: the job runs to completion with its failed rows listed', async () => {
      await nav('Import & export').click();
      const csv = [
        'name,phone,email,constituency,booth,ward',
        `Ravi Kumar,${voterPhones[0]},ravi@example.com,Varanasi,12,7`,
        `Sita Devi,${voterPhones[1]},,Varanasi,12,7`,
        `Mohan Lal,${voterPhones[2]},,Varanasi,14,8`,
        // A row without a name is the one an import refuses (a bad cell is only left out).
        `,${uniquePhone()},,Varanasi,12,7`,
      ].join('\n');
      await page
        .getByLabel('File')
        .setInputFiles({ name: 'roll.csv', mimeType: 'text/csv', buffer: Buffer.from(csv) });
      await page.getByRole('button', { name: 'Upload' }).click();
      const job = page.getByTestId('import-job');
      await job.getByText('Completed').waitFor({ timeout: 20_000 });
      await expect
        .poll(() => job.textContent(), { timeout: 10_000 })
        .toContain('3 created, 0 updated, 1 failed');
      await job.getByRole('button', { name: 'Download the failed rows (CSV)' }).waitFor();
      await accessible(page, 'import');
      await shoot(page, 'import');
      // The export reads its filters as they stand in the form: a ward typed, then Download at once.
      await page.getByLabel('Ward').fill('8');
      const [file] = await Promise.all([
        page.waitForEvent('download'),
        page.getByRole('button', { name: 'Download', exact: true }).click(),
      ]);
      const exported = readFileSync(await file.path(), 'utf8');
      expect(exported).toContain('Mohan Lal');
      expect(exported).not.toContain('Ravi Kumar');
    });

    it("imports a roll shaped as a UP roll export: the mapping step reads its headings (English and Hindi), a heading of the office's own is mapped, and the warnings show", async () => {
      await nav('Import & export').click();
      const english = [
        'Sl No,Part No,EPIC No,House No,Elector Name,Sex,Age,Mobile No,Ward,AC Name,Remarks',
        `1,21,UP/74/381/354053,4,Kamla Devi,F,52,98765432101,Ward 9,Varanasi Cantt.,door locked`,
        `2,21,UPV0000002,4,Shiv Prasad,M,55,${uniquePhone().slice(3)},Ward 9,Varanasi Cantt.,`,
      ].join('\n');
      await page
        .getByLabel('File')
        .setInputFiles({ name: 'up-roll.csv', mimeType: 'text/csv', buffer: Buffer.from(english) });
      const fills = (heading: string) => page.getByLabel(`What "${heading}" fills`);
      await fills('Elector Name').waitFor();
      expect(await fills('Elector Name').inputValue()).toBe('name');
      expect(await fills('Mobile No').inputValue()).toBe('phone');
      expect(await fills('AC Name').inputValue()).toBe('constituency');
      expect(await fills('Remarks').inputValue()).toBe('ignore');
      await page.getByRole('cell', { name: 'door locked' }).waitFor();
      // The office keeps its remarks in the address field.
      await fills('Remarks').selectOption('address');
      await page.getByLabel('Dry run: check every row, write nothing').check();
      await page.getByRole('button', { name: 'Check the file' }).click();
      await page.getByText('2 would be created, 0 updated, 0 rows have errors').waitFor();
      await page.getByText('1 cell would be left out.').waitFor();
      // The cell left out, named as the office reads its field ("Phone", not "phone").
      const leftOut = page
        .getByRole('region', { name: 'Cells left out (the rows are kept)' })
        .getByRole('row');
      await leftOut.getByRole('cell', { name: '98765432101' }).waitFor();
      expect(await leftOut.filter({ hasText: '98765432101' }).locator('td').nth(1).textContent()).toBe(
        'Phone',
      );
      await accessible(page, 'import mapping');
      await shoot(page, 'import-mapping');
      await page.getByLabel('Dry run: check every row, write nothing').uncheck();
      // The Hindi roll, in the Hindi console: its headings are known too; the last mapping is remembered.
      await page.getByRole('combobox', { name: 'Language', exact: true }).selectOption('hi');
      const hindi = [
        'क्रम संख्या,भाग संख्या,निर्वाचक का नाम,मकान संख्या,लिंग,आयु,मोबाइल,Remarks',
        `3,21,गीता देवी,5,महिला,40,${uniquePhone().slice(3)},नया घर`,
      ].join('\n');
      await page
        .getByLabel('फ़ाइल', { exact: true })
        .setInputFiles({ name: 'hindi-roll.csv', mimeType: 'text/csv', buffer: Buffer.from(hindi) });
      const भरता = (heading: string) => page.getByLabel(`"${heading}" क्या भरता है`);
      await भरता('निर्वाचक का नाम').waitFor();
      expect(await भरता('निर्वाचक का नाम').inputValue()).toBe('name');
      expect(await भरता('मोबाइल').inputValue()).toBe('phone');
      expect(await भरता('आयु').inputValue()).toBe('age');
      expect(await भरता('Remarks').inputValue()).toBe('address');
      await accessible(page, 'import mapping (hi)');
      await shoot(page, 'import-mapping-hi');
      await page.getByLabel('भाषा', { exact: true }).selectOption('en');
      await nav('Dashboard').waitFor();
    });

    it('lists and filters voters, opens a voter, and saves a segment', async () => {
      await nav('Voters').click();
      await page.getByText('3 voters').waitFor();
      await page.getByLabel('Ward').first().fill('7');
      await page.getByRole('button', { name: 'Apply' }).click();
      await page.getByText('2 voters').waitFor();
      await accessible(page, 'voters');
      await shoot(page, 'voters');
      await page.getByLabel('Save these filters as a segment').fill('Ward 7');
      await page.getByRole('button', { name: 'Save segment' }).click();
      await page.getByText('Segment “Ward 7” saved').waitFor();
      await page.getByRole('link', { name: 'Ravi Kumar' }).click();
      await page.getByRole('heading', { name: 'Ravi Kumar' }).waitFor();
      await page.getByText('ravi@example.com').waitFor();
      await accessible(page, 'voter');
      // Nothing personal in the address bar: the voter is an id.
      expect(page.url()).toMatch(/\/console\/voters\/\d+$/);
    });

    it('composes a campaign to a segment, previews it, sends it and watches it complete', async () => {
      await nav('Campaigns').click();
      await page.getByText('No campaign yet.').waitFor();
      await accessible(page, 'campaigns');
      await page.getByRole('link', { name: 'New campaign' }).click();
      await page.getByLabel('Name').fill('Ward 7 meeting');
      await page.getByLabel('Segment', { exact: true }).selectOption({ label: 'Ward 7' });
      await page.getByLabel('Message', { exact: true }).fill('Meeting at the ward office on Sunday, 10 am.');
      await page.getByTestId('rendered').getByText('Meeting at the ward office').waitFor();
      // No account of the office carries SMS yet: the form says the messages would be simulated.
      await page.getByRole('alert').filter({ hasText: 'only the sandbox' }).waitFor();
      await page.getByRole('button', { name: 'Save and check' }).click();
      const preview = page.getByTestId('preview');
      await preview.waitFor();
      await expect.poll(() => preview.textContent(), { timeout: 10_000 }).toContain('Will be sent2');
      // Checked again after a change: the same draft, saved again (once a 422, and an orphan draft each time).
      await page.getByLabel('Message', { exact: true }).fill('Meeting at the ward office on Sunday, 11 am.');
      await page.getByRole('button', { name: 'Save and check' }).click();
      await page.getByTestId('rendered').getByText('11 am').waitFor();
      await expect.poll(() => preview.textContent(), { timeout: 10_000 }).toContain('Will be sent2');
      const drafts = (await api(`${server.base}/api`, 'GET', '/campaigns?per_page=100', owner.token)) as {
        data: Array<{ name: string; status: string; message: string }>;
      };
      expect(drafts.data.filter((c) => c.name === 'Ward 7 meeting')).toMatchObject([
        { status: 'draft', message: 'Meeting at the ward office on Sunday, 11 am.' },
      ]);
      await accessible(page, 'compose');
      await shoot(page, 'compose');
      await page.getByRole('button', { name: 'Send now' }).click();
      await page.getByRole('heading', { name: 'Ward 7 meeting' }).waitFor();
      await page.locator('.page-head').getByText('Completed').waitFor({ timeout: 30_000 });
      await expect.poll(() => page.getByTestId('delivered').textContent(), { timeout: 15_000 }).toBe('2');
      // The campaign says what carried it, and that it was simulated.
      expect(await page.getByTestId('provider').textContent()).toBe('sandbox');
      await page.getByRole('alert').filter({ hasText: 'Simulated' }).waitFor();
      await accessible(page, 'campaign');
      await shoot(page, 'campaign');
    });

    it('shows a voter’s reply in the inbox without reloading, and answers it', async () => {
      await nav('Inbox').click();
      await page.getByText('No conversation matches.').waitFor();
      await api(`${server.base}/api`, 'POST', '/inbound', owner.token, {
        channel: 'sms',
        from: voterPhones[0],
        body: 'Will there be water tankers on Sunday?',
      });
      // The event stream brings it: no reload, no click.
      const item = page.getByRole('link', { name: /Ravi Kumar/ });
      await item.waitFor({ timeout: 15_000 });
      await item.click();
      // In the thread: the inbox's list shows the same text as the conversation's preview (strict mode would
      // find both once the thread has loaded).
      await page.locator('.thread').getByText('Will there be water tankers on Sunday?').waitFor();
      await page.getByLabel('Your reply').fill('Yes, two tankers at 9 am.');
      await page.getByRole('button', { name: 'Send reply' }).click();
      await page.locator('.thread .outbound').getByText('Yes, two tankers at 9 am.').waitFor();
      await page.getByRole('button', { name: 'Open a grievance' }).click();
      await page.getByText('A grievance is open for this conversation.').waitFor();
      await accessible(page, 'inbox');
      await shoot(page, 'inbox');
    });

    it('builds a survey in English and Hindi, runs it to a segment, and shows its results as charts beside tables', async () => {
      // The next test goes on in the inbox's thread this one leaves: it is opened again at the end.
      const thread = page.url();
      await nav('Surveys').click();
      await page.getByText('No survey yet.').waitFor();
      await accessible(page, 'surveys');
      await page.getByRole('link', { name: 'New survey' }).click();
      await page.getByLabel('Name', { exact: true }).fill('Ward opinion');
      await page.getByLabel('Introduction (English)').fill('A short survey from your MLA office.');
      await page.getByLabel('Introduction (हिन्दी)').fill('आपके विधायक कार्यालय का छोटा सर्वे।');
      await page.getByLabel('Question (English)', { exact: true }).fill('Will you vote for us?');
      await page.getByLabel('Question (हिन्दी)', { exact: true }).fill('क्या आप हमें वोट देंगे?');
      await page.getByLabel('Label (English)').nth(0).fill('Yes');
      await page.getByLabel('Label (English)').nth(1).fill('No');
      await page.getByLabel('Label (हिन्दी)').nth(0).fill('हाँ');
      await page.getByLabel('Label (हिन्दी)').nth(1).fill('नहीं');
      await page.getByLabel('Save the answer to').selectOption('support_level');
      await accessible(page, 'survey builder');
      // At 360 px the choices stack, each cell under its heading: nothing is cut off at the screen's edge.
      await page.setViewportSize({ width: 360, height: 740 });
      const choices = page.getByRole('region', { name: 'Choices' });
      expect(await choices.evaluate((el) => el.scrollWidth <= el.clientWidth)).toBe(true);
      const hindi = await page.getByLabel('Label (हिन्दी)').nth(1).boundingBox();
      expect(hindi!.x + hindi!.width).toBeLessThanOrEqual(360);
      await page.setViewportSize({ width: 1280, height: 800 });
      await shoot(page, 'survey-builder');
      await page.getByRole('button', { name: 'Create survey' }).click();
      await page.getByRole('heading', { name: /Ward opinion/ }).waitFor();
      await page.getByLabel('Segment', { exact: true }).selectOption({ label: 'Ward 7' });
      await page.getByRole('button', { name: 'Start a run' }).click();
      const surveys = (await api(`${server.base}/api`, 'GET', '/surveys', owner.token)) as {
        data: Array<{ id: string; name: string }>;
      };
      const id = surveys.data.find((x) => x.name === 'Ward opinion')!.id;
      const asked = async () =>
        (
          (await api(`${server.base}/api`, 'GET', `/surveys/${id}/runs`, owner.token)) as {
            data: Array<{ started: number }>;
          }
        ).data[0]?.started;
      await expect.poll(asked, { timeout: 20_000 }).toBe(2);
      // An answer counts once its question was handed to the provider: wait for both to have gone.
      const handedOver = async (to: string) =>
        (
          (await api(
            `${server.base}/api`,
            'GET',
            `/messages/history?to=${encodeURIComponent(to)}&per_page=5`,
            owner.token,
          )) as { data: Array<{ status: string }> }
        ).data[0]?.status !== 'queued'; // newest first: the survey's question
      for (const to of [voterPhones[0]!, voterPhones[1]!])
        await expect.poll(() => handedOver(to), { timeout: 20_000 }).toBe(true);
      // Ravi answers with the key, Sita with the Hindi label.
      for (const [from, body] of [
        [voterPhones[0], '1'],
        [voterPhones[1], 'नहीं'],
      ] as const)
        await api(`${server.base}/api`, 'POST', '/inbound', owner.token, { channel: 'sms', from, body });
      await page.getByText('2 responses, 2 completed.').waitFor({ timeout: 15_000 });
      await page.getByLabel('Group by').selectOption('booth');
      await page.getByRole('cell', { name: '12', exact: true }).first().waitFor();
      await accessible(page, 'survey');
      await shoot(page, 'survey');
      await page.goto(thread);
    });

    it('a thread of more than a page opens at its newest messages and pages back to its first', async () => {
      // 100 more replies from the same voter: with the first two, 102 messages, two pages of 100.
      for (let i = 1; i <= 100; i++)
        await api(`${server.base}/api`, 'POST', '/inbound', owner.token, {
          channel: 'sms',
          from: voterPhones[0],
          body: `Follow-up number ${i}`,
        });
      await page.reload();
      const thread = page.locator('.thread');
      await thread.getByText('Follow-up number 100', { exact: true }).waitFor({ timeout: 15_000 });
      // The newest page holds two messages: the page before it is read too, back to the first message.
      await thread.getByText('Will there be water tankers on Sunday?').waitFor();
      // Every message once (102, and what the service itself sent in the thread), none twice.
      expect(await thread.locator('li').count()).toBeGreaterThanOrEqual(102);
      expect(await thread.getByText('Follow-up number 1', { exact: true }).count()).toBe(1);
    });

    it('moves a grievance through its lifecycle to resolved', async () => {
      await nav('Grievances').click();
      await page.getByRole('button', { name: 'New grievance' }).click();
      await page.getByLabel('Title').fill('Street light out near booth 12');
      await page.getByLabel('Priority').selectOption('high');
      await page.getByRole('button', { name: 'Save' }).click();
      await page.getByRole('button', { name: 'Street light out near booth 12' }).click();
      const panel = page.getByTestId('grievance');
      await panel.getByText('Open').waitFor();
      await page.getByRole('button', { name: 'Start work' }).click();
      await panel.getByText('In progress').waitFor();
      await page.getByLabel('Resolution note').fill('Replaced on Tuesday.');
      await page.getByRole('button', { name: 'Mark resolved' }).click();
      await panel.getByText('Resolved').waitFor();
      await panel.getByText('Replaced on Tuesday.').waitFor();
      // Nothing reported and no description: a dash, not a blank. The panel's Close and the grievance's differ.
      expect(await panel.getByText('—', { exact: true }).count()).toBe(2);
      await page.getByRole('button', { name: 'Close grievance' }).waitFor();
      expect(await page.getByRole('button', { name: 'Close', exact: true }).count()).toBe(1);
      await accessible(page, 'grievances');
      await shoot(page, 'grievances');
    });

    it('manages consent: an opt-out, a silence period and a template with its DLT id', async () => {
      await nav('Consent').click();
      await page.getByLabel('Phone or email').fill(voterPhones[2]!);
      await page.getByRole('button', { name: 'Opt out' }).click();
      await page.getByRole('cell', { name: voterPhones[2]! }).waitFor();
      await page.getByLabel('Name').fill('Meeting invite');
      await page
        .getByLabel('Text', { exact: true })
        .fill('Namaste {{first_name}}, meet us in ward {{ward}}.');
      await page.getByLabel('DLT template id').fill('1107160000000000001');
      await page.getByLabel('Template id at MSG91').fill('flow-meeting');
      await page.getByRole('button', { name: 'Add' }).last().click();
      await page.getByRole('cell', { name: '1107160000000000001' }).waitFor();
      // The form is empty again, the provider's id included; then the template is edited in place.
      expect(await page.getByLabel('Template id at MSG91').inputValue()).toBe('');
      await page
        .getByRole('row', { name: /Meeting invite/ })
        .getByRole('button', { name: 'Edit' })
        .click();
      expect(await page.getByLabel('Template id at MSG91').inputValue()).toBe('flow-meeting');
      await page.getByLabel('Category').selectOption('service');
      await page.getByLabel('Name').fill('Meeting invite (service)');
      await page.getByRole('button', { name: 'Save' }).last().click();
      await page.getByRole('cell', { name: 'Meeting invite (service)' }).waitFor();
      const templates = (await api(`${server.base}/api`, 'GET', '/templates', owner.token)) as {
        data: Array<{ name: string; category: string; provider_template_ids: Record<string, string> }>;
      };
      expect(templates.data.find((tpl) => tpl.name === 'Meeting invite (service)')).toMatchObject({
        category: 'service',
        provider_template_ids: { msg91: 'flow-meeting' },
      });
      await accessible(page, 'consent');
      await shoot(page, 'consent');
      // A campaign to his ward: the dashboard lists his message as stopped, its reason in words.
      const base = `${server.base}/api`;
      const ward8 = (await api(base, 'POST', '/segments', owner.token, {
        name: 'Ward 8',
        filters: { ward: '8' },
      })) as { id: number };
      const notice = (await api(base, 'POST', '/campaigns', owner.token, {
        name: 'Ward 8 notice',
        channel: 'sms',
        message: 'The ward 8 office is open on Sunday.',
        segment_id: ward8.id,
      })) as { id: number };
      await api(base, 'POST', `/campaigns/${notice.id}/send`, owner.token, {});
      // The message stopped (the worker has run the campaign), then the dashboard shows it.
      await expect
        .poll(
          async () =>
            ((await api(base, 'GET', `/campaigns/${notice.id}`, owner.token)) as { status: string }).status,
          { timeout: 20_000 },
        )
        .toBe('completed');
      await nav('Dashboard').click();
      await expect
        .poll(() => page.getByTestId('dash-stopped').textContent(), { timeout: 20_000 })
        .toBe('Opted out (opted_out): 1');
    });

    it('keeps the privacy notice and answers requests: the public page in English and Hindi takes a request proven by a code, the privacy screen erases the person; a voter shows their consent', async () => {
      const base = `${server.base}/api`;
      const phone = uniquePhone();
      const voter = (await api(base, 'POST', '/voters', owner.token, {
        name: 'Geeta Verma',
        phone,
        consent: 'given',
      })) as { id: number };
      await go(`/voters/${voter.id}`);
      await page
        .getByTestId('voter-consent')
        .getByText(/^Given \(recorded by the office, /)
        .waitFor();
      await nav('Privacy').click();
      await page
        .getByLabel('Notice in English')
        .fill('We keep your name, phone and booth to tell you about our work in Varanasi.');
      await page
        .getByLabel('Notice in Hindi')
        .fill('हम वाराणसी में अपने काम की जानकारी देने के लिए आपका नाम, फ़ोन और बूथ रखते हैं।');
      await page
        .getByLabel('Who answers questions (name, address, email)')
        .fill('Grievance officer, Lanka, Varanasi');
      await page.getByRole('button', { name: 'Save a new version' }).click();
      await page.getByText(/^Version 1 ·/).waitFor();
      await accessible(page, 'privacy');
      // The public page, as the voter opens it from the notice's link: English, then Hindi.
      const { public_id: publicId } = (await api(base, 'GET', '/workspace', owner.token)) as {
        public_id: string;
      };
      const voterPage = await context.newPage();
      try {
        await voterPage.goto(`${server.base}/privacy/${publicId}`);
        await voterPage.getByRole('heading', { name: /^Privacy notice: / }).waitFor();
        await voterPage.getByText('We keep your name, phone and booth').waitFor();
        await voterPage.getByText(/Data Protection Board of India/).waitFor();
        await accessible(voterPage, 'privacy public page');
        await shoot(voterPage, 'privacy-public');
        await voterPage.getByRole('link', { name: 'हिन्दी' }).click();
        await voterPage.getByRole('heading', { name: /^गोपनीयता सूचना: / }).waitFor();
        await voterPage.getByText('हम वाराणसी में अपने काम').waitFor();
        await accessible(voterPage, 'privacy public page (Hindi)');
        await shoot(voterPage, 'privacy-public-hi');
        await voterPage.getByLabel('आपका फ़ोन नंबर या ईमेल पता').fill(phone);
        await voterPage.getByLabel('आप क्या चाहते हैं?').selectOption('erasure');
        await voterPage.getByRole('button', { name: 'मुझे कोड भेजें' }).click();
        await voterPage.getByLabel('आपको मिला कोड').fill(await otpFor(server, phone));
        await voterPage.getByRole('button', { name: 'पुष्टि करें' }).click();
        await voterPage.getByText(/आपका अनुरोध dpr_\d+ प्राप्त हो गया है।/).waitFor();
        await shoot(voterPage, 'privacy-public-done-hi');
      } finally {
        await voterPage.close();
      }
      // The office's privacy screen lists it (from the public page, verified); erasing asks first, naming what goes.
      await page.reload();
      const row = page.getByRole('row', { name: new RegExp(phone.replace('+', '\\+')) });
      await row.getByText('Public page').waitFor();
      await row.getByText('Verified').waitFor();
      await shoot(page, 'privacy');
      let asked = '';
      page.once('dialog', (dialog) => {
        asked = dialog.message();
      });
      await row.getByRole('button', { name: 'Erase' }).click();
      await page.getByText(/^Erased: \d+ rows removed or rewritten\./).waitFor();
      expect(asked).toContain('their voter record');
      expect(asked).toContain('cannot be undone');
      const gone = await fetch(`${base}/voters/${voter.id}`, {
        headers: { authorization: `Bearer ${owner.token}` },
      });
      expect(gone.status).toBe(404);
      // The breach register: recorded with its time in the office's zone, overdue until the Board is told.
      await page.getByLabel('Detected at').fill('2026-01-05T09:30');
      await page.getByLabel('What happened').fill('A printed walk list was lost');
      await page.getByRole('button', { name: 'Record a breach' }).click();
      const breach = page.getByRole('row', { name: /A printed walk list was lost/ });
      await breach.getByText('Overdue').waitFor();
      await breach.getByRole('button', { name: 'Board told now' }).click();
      await expect.poll(() => breach.getByText('Overdue').count()).toBe(0);
    });

    it('adds a volunteer, then deactivates them; the audit log shows both', async () => {
      await nav('Team').click();
      const email = uniqueEmail('vol');
      await page.getByLabel('Name').fill('Vikram Singh');
      await page.getByLabel('Email').fill(email);
      await page.getByLabel('First password').fill(PASSWORD);
      await page.getByRole('button', { name: 'Add a member' }).click();
      const row = page.getByRole('row', { name: /Vikram Singh/ });
      await row.getByText('Active').waitFor();
      await row.getByRole('button', { name: 'Deactivate' }).click();
      await row.getByText('Deactivated').waitFor();
      // A change made here is read again at once (the log's own refresh is every 10 s).
      await page.getByRole('cell', { name: 'user.deactivated' }).first().waitFor({ timeout: 5_000 });
      // A change made elsewhere (here through the API) shows in the log without a reload.
      const elsewhere = uniqueEmail('elsewhere');
      const added = (await api(`${server.base}/api`, 'POST', '/users', owner.token, {
        name: 'Added Elsewhere',
        email: elsewhere,
        password: PASSWORD,
        role: 'volunteer',
      })) as { id: number };
      await page
        .getByRole('row', { name: new RegExp(`user\\.created user ${added.id}$`) })
        .waitFor({ timeout: 20_000 });
      await accessible(page, 'team');
      await shoot(page, 'team');
    });

    it('adds a channel account and sends a test through it', async () => {
      await nav('Settings').click();
      await page.getByLabel('Name', { exact: true }).first().fill('Office sandbox');
      await page.getByRole('button', { name: 'Add' }).first().click();
      const row = page.getByRole('row', { name: /Office sandbox/ });
      await row.waitFor();
      await row.getByRole('button', { name: 'Manage' }).click();
      const panel = page.getByRole('region', { name: 'Office sandbox' });
      await panel.getByLabel('Send a test to').fill(owner.phone);
      await panel.getByRole('button', { name: 'Send test' }).click();
      await page
        .getByRole('status')
        .filter({ hasText: /test|Test/ })
        .waitFor();
      // The form is the provider's own fields, as the service describes them (GET /api/channel-accounts/providers).
      const adding = page.getByRole('form', { name: 'Add a channel account' });
      await adding.getByLabel('Name', { exact: true }).fill('Office MSG91');
      await adding.getByLabel('Provider').selectOption('msg91');
      // Each field by the provider's own words for it (its adapter gives them in English and Hindi).
      await adding.getByLabel('Sender id (DLT header) *').fill('CESOFC');
      await adding.getByLabel('Auth key *').fill('an-authkey');
      await adding.getByLabel("OTP template's Flow id").waitFor();
      expect(await adding.getByLabel('Phone number id *').count()).toBe(0);
      await adding.getByRole('button', { name: 'Add' }).click();
      const msg91 = page.getByRole('row', { name: /Office MSG91/ });
      await msg91.getByRole('cell', { name: 'MSG91', exact: true }).waitFor();
      // Managed: its callback URLs to paste at MSG91, made the SMS default, switched off and on again.
      await msg91.getByRole('button', { name: 'Manage' }).click();
      const managed = page.getByRole('region', { name: 'Office MSG91' });
      expect(await managed.getByLabel('delivery').inputValue()).toMatch(
        /\/api\/providers\/msg91\/cha_\d+\/[^/]+\/delivery$/,
      );
      await managed.getByRole('button', { name: 'Switch off' }).click();
      await msg91.getByText('Deactivated', { exact: true }).waitFor();
      await managed.getByRole('button', { name: 'Switch on' }).click();
      await msg91.getByText('Active', { exact: true }).waitFor();
      await managed.getByLabel('SMS').check();
      await managed.getByRole('button', { name: 'Save defaults' }).click();
      await managed.getByRole('status').filter({ hasText: 'Saved.' }).waitFor();
      // What carries SMS now is the MSG91 account (the workspace's own, not simulated).
      const carrier = async () =>
        (
          (await api(`${server.base}/api`, 'GET', '/workspace', owner.token)) as {
            channels: { sms: { provider: string; simulated: boolean } };
          }
        ).channels.sms;
      for (let i = 0; i < 50 && (await carrier()).provider !== 'msg91'; i++)
        await new Promise((resolve) => setTimeout(resolve, 100));
      const workspace = { channels: { sms: await carrier() } };
      expect(workspace.channels.sms).toMatchObject({ provider: 'msg91', simulated: false });
      // Off again: the rest of the run sends through the office's sandbox account, never to MSG91's cloud.
      await managed.getByRole('button', { name: 'Switch off' }).click();
      await msg91.getByText('Deactivated', { exact: true }).waitFor();
      await accessible(page, 'settings');
      await shoot(page, 'settings');
      // On a phone the accounts table stacks too: Manage and Delete in view, the status whole.
      await buttonsInViewAt360(page, page.getByRole('table', { name: 'Channel accounts' }), [
        'Manage',
        'Delete',
      ]);
      await nav('My profile').click();
      await page.getByRole('cell', { name: 'This session' }).waitFor();
      await accessible(page, 'profile');
    });

    it('keeps places: a ward with its aliases; an import names its unknown ward, added in one click as an alias', async () => {
      await nav('Places').click();
      await page.getByRole('heading', { name: 'Places', level: 1 }).waitFor();
      await page.getByRole('button', { name: 'Wards' }).click();
      await page.getByLabel('Name').fill('Ward 9');
      await page.getByLabel('Aliases').fill('9, Nine');
      await page.getByRole('button', { name: 'Add', exact: true }).click();
      await page.getByRole('cell', { name: '9, Nine' }).waitFor();
      await accessible(page, 'places');
      await shoot(page, 'places');
      // A roll that writes the ward in Devanagari: the import lists it as matching no place.
      await nav('Import & export').click();
      const phone = uniquePhone();
      const csv = ['name,phone,ward', `Geeta Devi,${phone},वार्ड 9`].join('\n');
      await page
        .getByLabel('File')
        .setInputFiles({ name: 'ward9.csv', mimeType: 'text/csv', buffer: Buffer.from(csv) });
      await page.getByRole('button', { name: 'Upload' }).click();
      const unknown = page.getByTestId('unknown-places');
      await unknown.getByRole('cell', { name: 'वार्ड 9', exact: true }).waitFor({ timeout: 20_000 });
      await unknown.getByLabel('A place to add वार्ड 9 to as an alias').selectOption({ label: 'Ward 9' });
      await shoot(page, 'import-places');
      await unknown.getByRole('button', { name: 'Add as its alias' }).click();
      await unknown.getByText('Every value now matches a place.').waitFor();
      await accessible(page, 'import with unknown places');
      // The ward filter now finds her by the place's name.
      await nav('Voters').click();
      await page.getByLabel('Ward').first().fill('ward 9');
      await page.getByRole('button', { name: 'Apply' }).click();
      // The list as filtered (her row alone, "1 voter"), not the unfiltered one still on screen.
      await page.getByText('1 voter', { exact: true }).waitFor();
      await page.getByRole('link', { name: 'Geeta Devi' }).waitFor();
      // Three more unknown wards: listed as people count them (2, 10, 11, not 10, 11, 2), added in one click.
      await nav('Import & export').click();
      const more = [
        'name,phone,ward',
        ...['Ward 11', 'Ward 2', 'Ward 10'].map((w) => `Voter ${w},${uniquePhone()},${w}`),
      ];
      await page
        .getByLabel('File')
        .setInputFiles({ name: 'wards.csv', mimeType: 'text/csv', buffer: Buffer.from(more.join('\n')) });
      await page.getByRole('button', { name: 'Upload' }).click();
      await unknown.getByRole('cell', { name: 'Ward 10', exact: true }).waitFor({ timeout: 20_000 });
      const values = await unknown.getByRole('row').locator('td:nth-child(2)').allTextContents();
      expect(values).toEqual(['Ward 2', 'Ward 10', 'Ward 11']);
      await unknown.getByRole('button', { name: 'Add all 3 as places' }).click();
      await unknown.getByText('Every value now matches a place.').waitFor();
      await nav('Places').click();
      await page.getByRole('button', { name: 'Wards' }).click();
      for (const ward of ['Ward 2', 'Ward 10', 'Ward 11'])
        await page.getByRole('cell', { name: ward, exact: true }).waitFor();
    });

    it('keeps the voter record: custom fields in Settings, a voter’s roll fields, tags and a sensitive field; filters by tag and tags the list', async () => {
      await api(`${server.base}/api`, 'POST', '/voter-fields', owner.token, {
        key: 'caste',
        label: 'Caste',
        type: 'choice',
        choices: ['General', 'OBC-Secret'],
        sensitive: true,
      });
      await nav('Settings').click();
      const fields = page.getByRole('table', { name: 'Custom voter fields' });
      await fields.getByRole('cell', { name: /^Caste/ }).waitFor();
      await page.getByLabel('Label').fill('Main issue');
      await page.getByLabel('Key', { exact: true }).fill('issue');
      await page.getByRole('button', { name: 'Add a field' }).click();
      await fields.getByRole('cell', { name: 'Main issue', exact: true }).waitFor();
      // A field's label and choices change in place; its key and type stay.
      await fields.getByRole('row', { name: /Caste/ }).getByRole('button', { name: 'Edit' }).click();
      const editing = page.getByRole('form', { name: 'Edit the field Caste' });
      await editing.getByLabel('Choices').fill('General, OBC-Secret, SC');
      await editing.getByRole('button', { name: 'Save the field' }).click();
      await fields.getByRole('cell', { name: 'General, OBC-Secret, SC' }).waitFor();
      await accessible(page, 'settings with custom fields');
      await shoot(page, 'voter-fields');
      // On a phone the table stacks, a block a field: its buttons are in view without scrolling sideways.
      await buttonsInViewAt360(page, fields, ['Edit', 'Delete']);

      // Ravi's housemate, in the same part and house.
      await api(`${server.base}/api`, 'POST', '/voters', owner.token, {
        name: 'Meena Kumari',
        phone: '+919812300035',
        part_number: 12,
        serial_number: 35,
        house_number: '7a',
        relation_type: 'husband',
        relation_name: 'Suresh Kumar',
      });
      await nav('Voters').click();
      await page.getByRole('link', { name: 'Ravi Kumar' }).click();
      await page.getByRole('heading', { name: 'Ravi Kumar' }).waitFor();
      await page.getByRole('button', { name: 'Edit' }).click();
      await page.getByLabel('EPIC number').fill('rvk1234567');
      await page.getByLabel('Part', { exact: true }).fill('12');
      await page.getByLabel('Serial', { exact: true }).fill('34');
      await page.getByLabel('House number').fill('7A');
      await page.getByLabel('Gender').selectOption('male');
      await page.getByLabel('Age', { exact: true }).fill('42');
      await page.getByLabel('Support').selectOption('1');
      await page.getByLabel('Tags').fill('Youth, Farmer');
      await page.getByLabel('Caste').selectOption('OBC-Secret');
      await page.getByLabel('Main issue').fill('Water supply');
      await page.getByRole('button', { name: 'Save' }).click();
      await page.getByText('RVK1234567').waitFor();
      await page.getByText('1 · Strong supporter').waitFor();
      await page.getByText('OBC-Secret').waitFor();
      await page.getByText('Water supply').waitFor();
      await page.getByRole('link', { name: 'Meena Kumari' }).waitFor();
      // Her line names her relative as the roll gives it, not her relation to Ravi ("Meena Kumari · Husband").
      const household = page.getByRole('region', { name: 'Household' }).getByRole('listitem');
      expect(await household.filter({ hasText: 'Meena Kumari' }).textContent()).toBe(
        'Meena Kumari · father or husband: Suresh Kumar',
      );
      await accessible(page, 'voter record');
      await shoot(page, 'voter-record');
      // The household, listed on the voters screen.
      await page.getByRole('button', { name: 'List this household' }).click();
      await page.getByText('2 voters', { exact: true }).waitFor();
      await page.getByRole('link', { name: 'Meena Kumari' }).waitFor();
      await page.getByRole('link', { name: 'Ravi Kumar' }).waitFor();
      expect(page.url()).not.toContain('household');
      // The handed-over filter is shown, with the other filters open; cleared, the whole roll is back.
      await page.getByRole('button', { name: 'More filters', expanded: true }).waitFor();
      await page.getByLabel('Household of voter (ID)').fill('');
      await page.getByLabel('Tags', { exact: true }).fill('youth');
      await page.getByRole('button', { name: 'Apply' }).click();
      await page.getByText('1 voter', { exact: true }).waitFor();
      await page.getByLabel('Tags to add').fill('Called');
      await page.getByRole('button', { name: 'Tag all 1 of this list' }).click();
      await page.getByText('Done: 1 of 1 voter changed.').waitFor();
      await page.getByRole('cell', { name: /Called/ }).waitFor();
      await accessible(page, 'voters with record filters');
      await shoot(page, 'voters-tagged');
      // The roll's other filters: by house number (Ravi's house, Meena's too), then none of the tags (Ravi is
      // left out).
      await page.getByLabel('Tags', { exact: true }).fill('');
      await page.getByLabel('House number').fill('7a');
      await page.getByRole('button', { name: 'Apply' }).click();
      await page.getByText('2 voters', { exact: true }).waitFor();
      await page.getByRole('link', { name: 'Ravi Kumar' }).waitFor();
      await page.getByRole('link', { name: 'Meena Kumari' }).waitFor();
      await page.getByLabel('House number').fill('');
      await page.getByLabel('None of these tags').fill('called');
      await page.getByRole('button', { name: 'Apply' }).click();
      await expect.poll(() => page.getByRole('link', { name: 'Ravi Kumar' }).count()).toBe(0);
      await page.getByRole('link', { name: 'Sita Devi' }).waitFor();
      // A custom field's filter: the sensitive caste (a politician may filter on it), then a text field, a value
      // nobody holds and then Ravi's (each answer different from the one before, so none is the last one's).
      await page.getByLabel('None of these tags').fill('');
      await page.getByLabel('Caste').selectOption('OBC-Secret');
      await page.getByRole('button', { name: 'Apply' }).click();
      await page.getByText('1 voter', { exact: true }).waitFor();
      await page.getByRole('link', { name: 'Ravi Kumar' }).waitFor();
      await page.getByLabel('Caste').selectOption('');
      await page.getByLabel('Main issue').fill('Roads');
      await page.getByRole('button', { name: 'Apply' }).click();
      await page.getByText('No voter matches.').waitFor();
      await page.getByLabel('Main issue').fill('Water supply');
      await page.getByRole('button', { name: 'Apply' }).click();
      await page.getByRole('link', { name: 'Ravi Kumar' }).waitFor();
      await page.getByText('1 voter', { exact: true }).waitFor();
      await page.getByLabel('Main issue').fill('');
      await page.getByRole('button', { name: 'Apply' }).click();
    });

    it('shows the API’s message on a refused action', async () => {
      await nav('Voters').click();
      await page.getByRole('button', { name: 'Add a voter' }).click();
      await page.getByLabel('Name').first().fill('Bad Phone');
      await page.getByLabel('Phone').first().fill('12');
      await page.getByRole('button', { name: 'Save', exact: true }).click();
      const alert = page.getByRole('alert');
      await alert.waitFor();
      expect(await alert.textContent()).toMatch(/phone/i);
    });

    it('switches to Hindi, remembers it across a reload, and formats numbers the Indian way', async () => {
      await page.getByRole('combobox', { name: 'Language', exact: true }).selectOption('hi');
      await nav('डैशबोर्ड').waitFor();
      await page.reload();
      await nav('इनबॉक्स').click();
      await page.getByRole('heading', { name: 'इनबॉक्स' }).waitFor();
      expect(await page.evaluate('document.documentElement.lang')).toBe('hi');
      await accessible(page, 'inbox (hi)');
      await nav('डैशबोर्ड').click();
      await page.getByRole('heading', { name: 'डैशबोर्ड' }).waitFor();
      await shoot(page, 'dashboard-hi');
      await nav('स्थान').click();
      await page.getByRole('heading', { name: 'स्थान', level: 1 }).waitFor();
      await page.getByRole('button', { name: 'वार्ड' }).click();
      await page.getByRole('cell', { name: 'Ward 9', exact: true }).waitFor();
      await accessible(page, 'places (hi)');
      await shoot(page, 'places-hi');
      await nav('आयात और निर्यात').click();
      await page.getByTestId('import-job').waitFor();
      await shoot(page, 'import-hi');
      await nav('सर्वे').click();
      await page.getByRole('link', { name: 'Ward opinion' }).click();
      await page.getByText('2 जवाब, 2 पूरे।').waitFor();
      await accessible(page, 'survey (hi)');
      await shoot(page, 'survey-hi');
      // The voter record's screens in Hindi: the roll with its filters, a voter, the custom fields.
      await nav('मतदाता').click();
      await page.getByRole('button', { name: 'और फ़िल्टर' }).click();
      await page.getByLabel('इस मतदाता का परिवार (ID)').waitFor();
      await accessible(page, 'voters (hi)');
      await shoot(page, 'voters-hi');
      await page.getByRole('link', { name: 'Ravi Kumar' }).click();
      await page.getByRole('heading', { name: 'Ravi Kumar' }).waitFor();
      await page.getByRole('button', { name: 'इस परिवार की सूची देखें' }).waitFor();
      // The channel of the voter's messages and conversations is named in Hindi, as on every other screen.
      await page.getByRole('cell', { name: 'एसएमएस', exact: true }).first().waitFor();
      await page
        .getByRole('link', { name: /^एसएमएस · / })
        .first()
        .waitFor();
      await accessible(page, 'voter record (hi)');
      await shoot(page, 'voter-record-hi');
      await nav('सेटिंग्स').click();
      await page.getByRole('table', { name: 'मतदाता के अतिरिक्त फ़ील्ड' }).waitFor();
      await shoot(page, 'voter-fields-hi');
      expect(await page.evaluate('new Intl.NumberFormat("hi-IN").format(1234567)')).toBe('12,34,567');
      await page.getByLabel('भाषा', { exact: true }).selectOption('en');
      await nav('Dashboard').waitFor();
    });

    it('sends as the gateways require: an MSG91 reply is a template with its fields, the builder a template per question, a run says why it failed (English and Hindi, 360 px)', async () => {
      // An office of its own, with MSG91 for SMS (DLT: templates only), signed in on a phone-sized screen.
      const call = (method: string, path: string, body?: unknown) =>
        api(`${server.base}/api`, method, path, office.token, body);
      const office = { phone: uniquePhone(), token: '' };
      office.token = (
        await api(`${server.base}/api`, 'POST', '/auth/register', undefined, {
          name: 'Varanasi MP Office',
          email: uniqueEmail('varanasi'),
          password: PASSWORD,
          phone: office.phone,
        })
      ).access_token as string;
      await call('POST', '/channel-accounts', {
        name: 'MSG91',
        provider: 'msg91',
        settings: { sender: 'VNSMPO' },
        credentials: { authkey: MSG91_AUTHKEY },
      });
      const template = async (name: string, body: string, flow: string) =>
        (
          await call('POST', '/templates', {
            name,
            channel: 'sms',
            body,
            provider_template_ids: { msg91: flow },
          })
        ).id as string;
      await template(
        'Complaint noted',
        'Namaste {{name}}, your complaint about {{ward}} is noted. -VNSMPO',
        'flow_noted',
      );
      const question = await template(
        'Drain question',
        'Is the drain in your street cleared? 1 yes 2 no -VNSMPO',
        'flow_drain',
      );
      const voter = uniquePhone();
      await call('POST', '/voters', { name: 'Shanti Devi', phone: voter, ward: 'Ward 12' });
      await call('POST', '/inbound', { channel: 'sms', from: voter, body: 'नाली अभी भी बंद है, कब साफ होगी?' });
      const phone = await browser.newContext({ viewport: { width: 360, height: 740 }, locale: 'en-IN' });
      phone.setDefaultTimeout(10_000);
      await phone.addInitScript(`sessionStorage.setItem('ces.token', ${JSON.stringify(office.token)})`);
      const p = await phone.newPage();
      const at360 = async (name: string) => {
        expect(await p.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(360);
        await p.screenshot({ path: join(SHOTS, `${name}-360.png`), fullPage: true });
      };
      mkdirSync(SHOTS, { recursive: true });
      try {
        for (const lang of ['en', 'hi'] as const) {
          const en = lang === 'en';
          await p.goto(`${server.base}/console/inbox`);
          await p.evaluate(`localStorage.setItem('ces.lang', '${lang}')`);
          await p.reload();
          await p.getByRole('link', { name: /Shanti Devi/ }).click();
          // No free-text box: the gateway would refuse it. A template, a field per variable, the text as it goes.
          await p
            .getByText(en ? 'MSG91 sends SMS only as DLT-registered templates' : 'MSG91 SMS केवल DLT में पंजीकृत')
            .waitFor();
          expect(await p.getByLabel(en ? 'Your reply' : 'आपका जवाब', { exact: true }).count()).toBe(0);
          await p
            .getByLabel(en ? 'Template' : 'टेम्पलेट', { exact: true })
            .selectOption({ label: 'Complaint noted' });
          await p.getByLabel(en ? 'Ward' : 'वार्ड', { exact: true }).fill('Ward 12 (Lanka)');
          await expect
            .poll(() => p.getByTestId('reply-rendered').textContent())
            .toBe('Namaste Shanti Devi, your complaint about Ward 12 (Lanka) is noted. -VNSMPO');
          await accessible(p, `template reply (${lang})`);
          await at360(`inbox-template-reply${en ? '' : '-hi'}`);
          if (en) {
            await p.getByRole('button', { name: 'Send reply' }).click();
            await expect
              .poll(() =>
                msg91.requests.some((r) => {
                  const body = r.json as { template_id: string; recipients: Array<Record<string, string>> };
                  return (
                    body.template_id === 'flow_noted' &&
                    Object.values(body.recipients[0]!).includes('Ward 12 (Lanka)')
                  );
                }),
              )
              .toBe(true);
          }
          // The builder: a template per question, and the channels each question can go on.
          await p.goto(`${server.base}/console/surveys/new`);
          const channelsOf = p.getByTestId('channels-0');
          await channelsOf.waitFor();
          // Once the workspace is read: SMS is not among them (MSG91 needs a template).
          await expect.poll(() => channelsOf.textContent()).not.toMatch(en ? /SMS/ : /एसएमएस/);
          await p
            .getByLabel(en ? 'SMS template (DLT)' : 'SMS टेम्पलेट (DLT)', { exact: true })
            .selectOption({ label: 'Drain question' });
          await expect.poll(() => channelsOf.textContent()).toMatch(en ? /SMS/ : /एसएमएस/);
          await accessible(p, `survey builder templates (${lang})`);
          await at360(`survey-builder-templates${en ? '' : '-hi'}`);
          // Settings speaks the office's language, a provider's fields included (their adapter gives both).
          await p.goto(`${server.base}/console/settings`);
          const adding = p.getByRole('form', { name: en ? 'Add a channel account' : 'चैनल खाता जोड़ें' });
          await adding.getByLabel(en ? 'Provider' : 'प्रदाता').selectOption('msg91');
          await adding.getByLabel(en ? 'Sender id (DLT header) *' : 'सेंडर आईडी (DLT हेडर) *').waitFor();
          await adding.getByText(en ? 'The DLT-registered sender id' : 'DLT में पंजीकृत सेंडर आईडी').waitFor();
          await at360(`settings-provider-fields${en ? '' : '-hi'}`);
          if (en) {
            // The account's provider log: the reply sent above, what went and what MSG91 answered, redacted.
            // The office's one account so far (its table stacks at 360 px: a block, not a row).
            await p
              .getByRole('table', { name: 'Channel accounts' })
              .getByRole('button', { name: 'Manage' })
              .click();
            const panel = p.getByRole('region', { name: 'MSG91', exact: true });
            await panel.getByText('Provider log', { exact: true }).click();
            const sent = panel.getByRole('row', { name: /To the provider · message/ }).first();
            await sent.waitFor({ timeout: 15_000 });
            expect(await sent.textContent()).toContain('200');
            await sent.getByText(/POST http/).click();
            const request = await sent.locator('pre').first().textContent();
            expect(request).toContain('flow_noted');
            expect(request).toContain('[15 characters]');
            expect(request).not.toContain('Ward 12 (Lanka)');
            expect(request).not.toContain(voter.slice(1));
            await accessible(p, 'channel log');
            await at360('settings-channel-log');
            await panel
              .locator('details')
              .first()
              .screenshot({ path: join(SHOTS, 'settings-channel-log-panel-360.png') });
          }
        }
        // A run the gateway refuses ends failed, and its page says why. (The account named for it has a key
        // MSG91 refuses.)
        const refusing = await call('POST', '/channel-accounts', {
          name: 'MSG91 old key',
          provider: 'msg91',
          settings: { sender: 'VNSMPO' },
          credentials: { authkey: 'an-old-key-msg91-refuses' },
        });
        const survey = (await call('POST', '/surveys', {
          name: 'Drain survey',
          questions: [
            {
              key: 'drain',
              type: 'choice',
              text: { en: 'Is the drain cleared?' },
              choices: [
                { key: '1', label: { en: 'Yes' } },
                { key: '2', label: { en: 'No' } },
              ],
              templates: { sms: question },
            },
          ],
        })) as { id: string };
        await call('POST', `/surveys/${survey.id}/runs`, {
          channel: 'sms',
          recipients: [voter],
          channel_account_id: refusing.id,
        });
        await p.goto(`${server.base}/console/surveys/${survey.id}`);
        await p.getByTestId('run-last-error').waitFor({ timeout: 20_000 });
        expect(await p.getByTestId('run-last-error').textContent()).toContain('auth_failed');
        await p.getByText('विफल').first().waitFor();
        await at360('survey-run-failed-hi');
        // A run the channel would refuse is refused before anything is sent, and says why.
        const plain = (await call('POST', '/surveys', {
          name: 'Plain survey',
          questions: [{ key: 'issue', type: 'text', text: { en: 'Your biggest issue?' } }],
        })) as { id: string };
        await call('POST', '/segments', { name: 'Everyone' });
        await p.goto(`${server.base}/console/surveys/${plain.id}`);
        await p.getByLabel('सेगमेंट', { exact: true }).selectOption({ label: 'Everyone' });
        await p.getByRole('button', { name: 'दौर शुरू करें' }).click();
        await p.getByRole('alert').getByText('questions.0.templates.sms', { exact: true }).waitFor();
        await at360('survey-run-refused-hi');
        // The inbox, in English again: a draft belongs to its conversation, and a STOP closes the reply box.
        const second = uniquePhone();
        await call('POST', '/inbound', { channel: 'sms', from: second, body: 'Meeting tomorrow?' });
        await p.evaluate(`localStorage.setItem('ces.lang', 'en')`);
        await p.goto(`${server.base}/console/inbox`);
        await p.getByRole('link', { name: /Shanti Devi/ }).click();
        await p.getByLabel('Template', { exact: true }).selectOption({ label: 'Complaint noted' });
        // At 360 px the list gives way to the open thread: back to it ("All conversations").
        await p.getByRole('link', { name: 'All conversations' }).click();
        await p.getByRole('link', { name: new RegExp(second.slice(1)) }).click();
        await p.locator('.thread').getByText('Meeting tomorrow?').waitFor();
        expect(await p.getByTestId('reply-rendered').count()).toBe(0);
        await call('POST', '/inbound', { channel: 'sms', from: voter, body: 'STOP' });
        await p.getByRole('link', { name: 'All conversations' }).click();
        await p.getByRole('link', { name: /Shanti Devi/ }).click();
        // Read afresh (the thread may show what it held a moment before, until the live stream brings the STOP).
        await p.reload();
        await p.getByText('Opted out of SMS by this reply').waitFor();
        expect(await p.getByTestId('consent-event').count()).toBe(1);
        await p.getByText(`${voter} has opted out of SMS`).waitFor();
        expect(await p.getByRole('button', { name: 'Send reply' }).count()).toBe(0);
        await accessible(p, 'opted-out thread');
        await at360('inbox-opted-out');
      } finally {
        await phone.close();
      }
    });

    it("times typed in the console are the office's (Asia/Kolkata), on a laptop set to UTC: a silence period 06:00-18:00 is stored as 00:30-12:30 UTC", async () => {
      const laptop = await browser.newContext({
        viewport: { width: 1280, height: 800 },
        locale: 'en-IN',
        timezoneId: 'UTC',
      });
      laptop.setDefaultTimeout(10_000);
      await laptop.addInitScript(`sessionStorage.setItem('ces.token', ${JSON.stringify(owner.token)})`);
      const p = await laptop.newPage();
      try {
        expect(await p.evaluate('Intl.DateTimeFormat().resolvedOptions().timeZone')).toBe('UTC');
        await p.goto(`${server.base}/console/consent`);
        await p.getByLabel('Starts').waitFor();
        // The zone is named beside the fields.
        await p.getByText('In IST, the office’s time zone').first().waitFor();
        const silence = p
          .locator('section')
          .filter({ has: p.getByRole('heading', { name: 'Silence periods' }) });
        await silence.getByLabel('Constituency', { exact: true }).fill('Zone Test');
        await silence.getByLabel('Starts').fill('2031-03-10T06:00');
        await silence.getByLabel('Ends').fill('2031-03-10T18:00');
        await silence.getByRole('button', { name: 'Add', exact: true }).click();
        // Shown back in the office's zone: 6:00 am IST, whatever the laptop's.
        await silence
          .getByText(/10 Mar 2031, 6:00\sam IST/)
          .first()
          .waitFor();
        await expect
          .poll(async () => {
            const periods = (await api(`${server.base}/api`, 'GET', '/silence-periods', owner.token)) as {
              data: Array<{ constituency: string; starts_at: string; ends_at: string }>;
            };
            return periods.data.find((x) => x.constituency === 'Zone Test');
          })
          .toMatchObject({ starts_at: '2031-03-10T00:30:00.000Z', ends_at: '2031-03-10T12:30:00.000Z' });
        // Settings: the office renames its workspace, and makes Hindi its voters' language.
        await p.goto(`${server.base}/console/settings`);
        const before = (await api(`${server.base}/api`, 'GET', '/workspace', owner.token)) as {
          name: string;
        };
        await p.getByLabel('Office name').fill("Varanasi MP Office's campaign");
        await p.getByLabel('Voters’ language').selectOption('hi');
        await p.getByRole('button', { name: 'Save', exact: true }).first().click();
        await expect
          .poll(async () => api(`${server.base}/api`, 'GET', '/workspace', owner.token))
          .toMatchObject({ name: "Varanasi MP Office's campaign", default_language: 'hi' });
        await api(`${server.base}/api`, 'PATCH', '/workspace', owner.token, {
          name: before.name,
          default_language: 'en',
        });
      } finally {
        await laptop.close();
      }
    });

    it('a volunteer sees only their inbox, voters read-only and their profile', async () => {
      const email = uniqueEmail('field');
      const added = await api(`${server.base}/api`, 'POST', '/users', owner.token, {
        name: 'Field Volunteer',
        email,
        password: PASSWORD,
        role: 'volunteer',
      });
      // A volunteer sees their part of the roll: the ward of Ravi Kumar (7) is theirs.
      await api(`${server.base}/api`, 'PATCH', `/users/${(added as { id: number }).id}`, owner.token, {
        coverage: { wards: ['7'] },
      });
      const volunteer = await context.browser()!.newContext({ viewport: { width: 360, height: 740 } });
      const v = await volunteer.newPage();
      v.on('console', (message) => {
        if (/Content.Security.Policy/i.test(message.text())) cspViolations.push(message.text());
      });
      // Keyboard only: Tab through the sign-in form and press Enter.
      await v.goto(`${server.base}/console/`);
      await v.getByLabel('Email').waitFor();
      await v.keyboard.press('Tab'); // language
      await v.keyboard.press('Tab'); // Password (sign-in mode)
      await v.keyboard.press('Tab'); // Code by SMS
      await v.keyboard.press('Tab'); // New office
      await v.keyboard.press('Tab');
      await v.keyboard.type(email);
      await v.keyboard.press('Tab');
      await v.keyboard.type(PASSWORD);
      await v.keyboard.press('Enter');
      await v.getByRole('heading', { name: 'Inbox' }).waitFor();
      // At 360 px the navigation folds behind the Menu button.
      expect(await v.getByRole('navigation', { name: 'Main' }).isVisible()).toBe(false);
      await v.getByRole('button', { name: 'Menu' }).click();
      const links = await v.getByRole('navigation', { name: 'Main' }).getByRole('link').allTextContents();
      expect(links).toEqual(['Inbox', 'Voters', 'Field', 'My profile']);
      // Not the conversation of the staff's voter (not assigned to this volunteer).
      await v.getByText('No conversation matches.').waitFor();
      await v.goto(`${server.base}/console/team`);
      await v.getByRole('heading', { name: 'Page not found' }).waitFor();
      await v.goto(`${server.base}/console/voters`);
      await v.getByRole('link', { name: 'Ravi Kumar' }).click();
      await v.getByRole('heading', { name: 'Ravi Kumar' }).waitFor();
      expect(await v.getByRole('button', { name: 'Delete' }).count()).toBe(0);
      expect(await v.getByRole('button', { name: 'Edit' }).count()).toBe(0);
      // The record, without what is sensitive: the caste and the support level never reach a volunteer's page.
      await v.getByText('Water supply').waitFor();
      await v.getByText('RVK1234567').waitFor();
      expect(await v.content()).not.toContain('OBC-Secret');
      expect(await v.content()).not.toContain('Strong supporter');
      expect(await v.getByText('Caste').count()).toBe(0);
      await v.goto(`${server.base}/console/voters`);
      await v.getByRole('link', { name: 'Ravi Kumar' }).waitFor();
      expect(await v.content()).not.toContain('OBC-Secret');
      await v.getByRole('button', { name: 'More filters' }).click();
      expect(await v.getByLabel('Support').count()).toBe(0);
      // A sensitive field has no filter for a volunteer; the others do.
      await v.getByLabel('Main issue').waitFor();
      expect(await v.getByLabel('Caste').count()).toBe(0);
      expect(await v.content()).not.toContain('OBC-Secret');
      await v.getByRole('link', { name: 'Ravi Kumar' }).click();
      await v.getByRole('heading', { name: 'Ravi Kumar' }).waitFor();
      await accessible(v, 'volunteer voter');
      await v.screenshot({ path: join(SHOTS, 'volunteer-voter-360.png'), fullPage: true });
      // Signing out drops the token.
      await v.getByRole('button', { name: 'Menu' }).click();
      await v.getByRole('button', { name: 'Sign out' }).click();
      await v.getByRole('button', { name: 'Sign in' }).waitFor();
      expect(await v.evaluate('sessionStorage.getItem("ces.token")')).toBeNull();
      await volunteer.close();
    });

    it('a manager sees every screen but the team and the settings', async () => {
      const email = uniqueEmail('manager');
      await api(`${server.base}/api`, 'POST', '/users', owner.token, {
        name: 'Office Manager',
        email,
        password: PASSWORD,
        role: 'manager',
      });
      const manager = await context.browser()!.newContext({ viewport: { width: 1280, height: 800 } });
      const m = await manager.newPage();
      await m.goto(`${server.base}/console/`);
      await m.getByLabel('Email').fill(email);
      await m.getByLabel('Password').fill(PASSWORD);
      await m.getByRole('button', { name: 'Sign in' }).click();
      await m.getByRole('heading', { name: 'Dashboard' }).waitFor();
      const links = await m.getByRole('navigation', { name: 'Main' }).getByRole('link').allTextContents();
      expect(links).toEqual([
        'Dashboard',
        'Inbox',
        'Voters',
        'Field',
        'Booth board',
        'Import & export',
        'Campaigns',
        'Surveys',
        'Grievances',
        'Consent',
        'Privacy',
        'Places',
        'My profile',
      ]);
      await m.goto(`${server.base}/console/settings`);
      await m.getByRole('heading', { name: 'Page not found' }).waitFor();
      await manager.close();
    });

    it('field work on a phone at 360 px: the walk list by house, visits and poll-day marks made offline survive a reload and arrive once when the network returns; the booth board updates live (English and Hindi)', async () => {
      // A server of its own, stopped and started again on its port: the network really goes (a service worker's
      // fetches are not held by the browser's offline switch alone).
      const fieldDir = mkdtempSync(join(tmpdir(), 'ces-field-'));
      const port = await freePort();
      const env = { DATABASE_URL: `sqlite:${join(fieldDir, 'field.db')}` };
      let office = await startServer(env, port);
      const base = `${office.base}/api`;
      const phone = await browser.newContext({
        viewport: { width: 360, height: 740 },
        locale: 'en-IN',
        serviceWorkers: 'allow',
      });
      const board = await browser.newContext({
        viewport: { width: 360, height: 740 },
        serviceWorkers: 'block',
      });
      try {
        const ownerEmail = uniqueEmail('field-owner');
        const token = (
          await api(base, 'POST', '/auth/register', undefined, {
            name: 'Kashi Office',
            email: ownerEmail,
            password: PASSWORD,
            phone: uniquePhone(),
          })
        ).access_token as string;
        // Part 21 of booth 21: 30 voters, two to a house; every third a supporter.
        for (let serial = 1; serial <= 30; serial++)
          await api(base, 'POST', '/voters', token, {
            name: `Voter ${serial}`,
            phone: uniquePhone(),
            booth: 'Booth 21',
            part_number: 21,
            serial_number: serial,
            house_number: String(Math.ceil(serial / 2)),
            ...(serial % 3 === 0 ? { support_level: 1 } : {}),
          });
        const email = uniqueEmail('booth-worker');
        const worker = await api(base, 'POST', '/users', token, {
          name: 'Booth Worker',
          email,
          password: PASSWORD,
          role: 'volunteer',
        });
        const survey = await api(base, 'POST', '/surveys', token, {
          name: 'Door survey',
          questions: [
            {
              key: 'issue',
              type: 'choice',
              text: { en: 'Biggest issue?', hi: 'सबसे बड़ा मुद्दा?' },
              choices: [
                { key: 'water', label: { en: 'Water', hi: 'पानी' } },
                { key: 'roads', label: { en: 'Roads', hi: 'सड़क' } },
              ],
            },
          ],
        });
        const turf = await api(base, 'POST', '/turfs', token, {
          name: 'Part 21',
          filters: { part_number: 21 },
          assigned_to: [worker.id],
          survey_id: survey.id,
        });

        const v = await phone.newPage();
        v.on('console', (message) => {
          if (/Content.Security.Policy/i.test(message.text())) cspViolations.push(message.text());
        });
        const phoneUrls: string[] = [];
        v.on('framenavigated', (frame) => {
          if (frame === v.mainFrame()) phoneUrls.push(frame.url());
        });
        await v.goto(`${office.base}/console/`);
        await v.getByLabel('Email').fill(email);
        await v.getByLabel('Password').fill(PASSWORD);
        await v.getByRole('button', { name: 'Sign in' }).click();
        await v.getByRole('heading', { name: 'Inbox' }).waitFor();
        await v.getByRole('button', { name: 'Menu' }).click();
        await v.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Field' }).click();
        await v.getByRole('heading', { name: 'Part 21' }).waitFor();
        await v.getByText('30 voters in 15 houses').waitFor();
        await v.getByText('Everything is sent.').waitFor();
        await accessible(v, 'my turfs');
        await v.screenshot({ path: join(SHOTS, 'field-turfs-360.png'), fullPage: true });
        await v.getByRole('link', { name: 'Walk list' }).click();
        await v.getByRole('heading', { name: 'House 1', exact: true }).waitFor();
        // A house's voters together, in serial order; no support level reaches a volunteer's phone.
        const firstHouse = v.locator('li.house').first();
        expect(await firstHouse.locator('strong').allTextContents()).toEqual(['Voter 1', 'Voter 2']);
        expect(await v.content()).not.toContain('supporter');
        // The service worker holds the app shell once it controls the page.
        await v.waitForFunction('navigator.serviceWorker.controller !== null', undefined, {
          timeout: 10_000,
        });
        await accessible(v, 'walk list');
        await v.getByRole('button', { name: 'Record visit' }).first().click();
        await v.getByRole('button', { name: 'Not home' }).waitFor();
        await v.screenshot({ path: join(SHOTS, 'field-walk-list-360.png'), fullPage: false });
        await v.getByRole('button', { name: 'Record visit' }).first().click();

        // The network goes: the browser says so, and the service is gone.
        await phone.setOffline(true);
        office.child.kill('SIGTERM');
        await new Promise((r) => office.child.once('exit', r));
        for (let i = 0; i < 20; i++) {
          await v.getByRole('button', { name: 'Record visit' }).nth(i).click();
          // The first door answers the turf's survey.
          if (i === 0) await v.getByLabel('Biggest issue?').selectOption('roads');
          await v.getByRole('button', { name: i % 4 === 3 ? 'Not home' : 'Met', exact: true }).click();
        }
        await v.getByText('20 waiting to be sent').waitFor();
        await v.getByRole('link', { name: 'Poll day' }).click();
        await v.getByRole('heading', { name: 'Poll day' }).waitFor();
        expect(await v.getByLabel('Part number').inputValue()).toBe('21');
        for (let serial = 1; serial <= 10; serial++) {
          await v.getByLabel('Serial number').fill(String(serial));
          await v.getByRole('button', { name: 'Voted', exact: true }).click();
        }
        await v.getByText('30 waiting to be sent').waitFor();
        await v.screenshot({ path: join(SHOTS, 'field-poll-day-offline-360.png'), fullPage: true });
        // What the phone holds (the lists it opened, the queue): no support level, no sensitive field.
        const held = (await v.evaluate(`new Promise((resolve) => {
          const open = indexedDB.open('ces-field');
          open.onsuccess = () => {
            const db = open.result;
            const tx = db.transaction(['cache', 'queue']);
            const out = [];
            tx.objectStore('cache').getAll().onsuccess = (e) => out.push(...e.target.result);
            tx.objectStore('queue').getAll().onsuccess = (e) => out.push(...e.target.result);
            tx.oncomplete = () => { db.close(); resolve(JSON.stringify(out)); };
          };
        })`)) as string;
        expect(held).toContain('Voter 30');
        expect(held).toContain('"kind":"mark"');
        expect(held).not.toContain('support_level');
        // A reload with the network still gone: the shell from the service worker, the queue from the device.
        await v.reload();
        await v.getByRole('heading', { name: 'Poll day' }).waitFor();
        await v.getByText('30 waiting to be sent').waitFor();
        await v.getByText('No network: showing what this phone kept.').waitFor();
        // Hindi, as a booth agent may read it.
        await v.getByRole('button', { name: 'Menu' }).click();
        await v.getByRole('combobox', { name: 'Language', exact: true }).selectOption('hi');
        await v.getByText('30 भेजे जाने बाकी').waitFor();
        await v.getByRole('button', { name: 'मेनू' }).click();
        await v.screenshot({ path: join(SHOTS, 'field-poll-day-offline-360-hi.png'), fullPage: true });

        // The network returns: everything is sent, once.
        office = await startServer(env, port);
        await phone.setOffline(false);
        await v.getByText('सब भेज दिया गया है।').waitFor({ timeout: 30_000 });
        expect(await v.locator('[data-waiting]').getAttribute('data-waiting')).toBe('0');
        const visits = await api(base, 'GET', `/visits?turf_id=${turf.id}&per_page=100`, token);
        expect(visits.total).toBe(20);
        const rows = visits.data as Array<{ voter_id: number; user_id: number; outcome: string }>;
        expect(new Set(rows.map((r) => r.voter_id)).size).toBe(20);
        expect(rows.every((r) => r.user_id === worker.id)).toBe(true);
        expect(rows.filter((r) => r.outcome === 'not_home')).toHaveLength(5);
        const responses = await api(base, 'GET', `/surveys/${survey.id}/responses`, token);
        expect(responses.data).toMatchObject([{ channel: 'visit', answers: { issue: 'roads' } }]);
        const turnout = await api(base, 'GET', '/poll-day/turnout?group_by=part_number', token);
        expect(turnout.data).toEqual([
          { group: 21, voters: 30, voted: 10, supporters: 10, supporters_voted: 3 },
        ]);
        // The walk list in Hindi, with the visits made offline.
        await v.goto(`${office.base}/console/field/${turf.id}`);
        await v.getByRole('heading', { name: 'मकान 1', exact: true }).waitFor();
        await v.screenshot({ path: join(SHOTS, 'field-walk-list-360-hi.png'), fullPage: false });
        await v.getByRole('button', { name: 'मेनू' }).click();
        await v.getByLabel('भाषा', { exact: true }).selectOption('en');
        await v.getByRole('button', { name: 'Menu' }).click();

        // The booth board: turnout and the supporters still to call, live as marks come.
        const m = await board.newPage();
        await m.goto(`${office.base}/console/`);
        await m.getByLabel('Email').fill(ownerEmail);
        await m.getByLabel('Password').fill(PASSWORD);
        await m.getByRole('button', { name: 'Sign in' }).click();
        await m.getByRole('heading', { name: 'Dashboard' }).waitFor();
        await m.goto(`${office.base}/console/booth`);
        await m.getByRole('heading', { name: 'Booth board' }).waitFor();
        await m.getByText('10 (33%)').waitFor();
        await m.getByRole('button', { name: 'To call (7)' }).click();
        await m.getByText('Voter 12').waitFor();
        expect(await m.getByRole('link', { name: /^Call \+/ }).count()).toBe(7);
        await accessible(m, 'booth board');
        await m.screenshot({ path: join(SHOTS, 'field-booth-board-360.png'), fullPage: true });
        // A mark at the booth reaches the board without a reload.
        await api(base, 'POST', '/poll-day/marks', token, {
          marks: [
            {
              client_id: crypto.randomUUID(),
              part_number: 21,
              serial_number: 12,
              voted: true,
              marked_at: new Date().toISOString(),
            },
          ],
        });
        await m.getByText('11 (37%)').waitFor({ timeout: 10_000 });
        await expect.poll(() => m.getByText('Voter 12').count(), { timeout: 10_000 }).toBe(0);
        await m.getByRole('button', { name: 'Menu' }).click();
        await m.getByRole('combobox', { name: 'Language', exact: true }).selectOption('hi');
        await m.getByRole('button', { name: 'मेनू' }).click();
        await m.getByRole('heading', { name: 'बूथ बोर्ड' }).waitFor();
        await m.screenshot({ path: join(SHOTS, 'field-booth-board-360-hi.png'), fullPage: true });

        // Signing out deletes what the phone held.
        await v.getByRole('button', { name: 'Menu' }).click();
        await v.getByRole('button', { name: 'Sign out' }).click();
        await v.getByRole('button', { name: 'Sign in' }).waitFor();
        const databases = (await v.evaluate(
          'indexedDB.databases().then((d) => d.map((x) => x.name))',
        )) as string[];
        expect(databases).not.toContain('ces-field');
        // Nothing personal in a page's address: turfs are named by id.
        for (const url of phoneUrls) expect(decodeURIComponent(url)).not.toMatch(/Voter \d|\+91\d/);
      } finally {
        await phone.close();
        await board.close();
        office.child.kill('SIGTERM');
        await new Promise((r) => (office.child.exitCode !== null ? r(null) : office.child.once('exit', r)));
        rmSync(fieldDir, { recursive: true, force: true });
      }
    }, 180_000);

    it('says so when the service does not answer at load, and tries again', async () => {
      await page.route('**/api/user', (route) =>
        route.fulfill({
          status: 503,
          contentType: 'application/json',
          body: JSON.stringify({
            success: false,
            error_code: 'service_unavailable',
            message: 'The database does not answer right now; try again in a moment.',
          }),
        }),
      );
      await go('/voters');
      await page.getByText('The database does not answer right now').waitFor();
      await accessible(page, 'load error');
      await page.unroute('**/api/user');
      await page.getByRole('button', { name: 'Try again' }).click();
      await page.getByRole('heading', { name: 'Voters' }).waitFor();
    });

    it('drops the token on a 401 and goes back to sign-in', async () => {
      const token = await page.evaluate('sessionStorage.getItem("ces.token")');
      await fetch(`${server.base}/api/auth/logout`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}` },
      });
      // The next request the page makes answers 401 (a reload asks for the signed-in user at once; a click on a
      // screen read a moment ago is served from the cache, and its 401 waited for the next refetch: 8-10 s).
      await page.reload();
      await page.getByRole('button', { name: 'Sign in' }).waitFor();
      expect(await page.evaluate('sessionStorage.getItem("ces.token")')).toBeNull();
    });

    it('broke no CSP rule and put nothing personal in a page URL', () => {
      expect(cspViolations).toEqual([]);
      const personal = [owner.email, owner.phone, ...voterPhones, 'Ravi', 'ravi@example.com'];
      for (const url of pageUrls)
        for (const value of personal) expect(decodeURIComponent(url)).not.toContain(value);
    });
  },
);
