/**
 * npm run bench:events [-- --seconds 10 --events 40]
 *
 * The live stream pushed, not polled (issue 36). Against what `npm start` runs, over HTTP:
 *   1. the server's CPU with 0 (the reference), 1, 200 and 500 idle streams open, each over `--seconds`
 *      (utime + stime of the process from /proc, as a share of one core);
 *   2. an inbound message's `message.received` reaching 500 streams: p50/p99 from the POST to each arrival,
 *      beside the POST's own time;
 *   3. SQLite: the worst wait of another workspace's `GET /api/voters` (one after another) while a signed
 *      WhatsApp webhook body of 1 MB (1,000 replies) is applied, beside its worst wait with no callback.
 * SQLite by default (a fresh file under bench/out); DATABASE_URL=postgres://... runs it on PostgreSQL.
 * Writes bench/out/events-<dialect>.md.
 */
import type { ChildProcess } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { api, freePort, openStream, spawnNpmStart, type Stream, waitUntilUp } from './server.ts';

const { values: args } = parseArgs({
  options: {
    seconds: { type: 'string', default: '10' },
    events: { type: 'string', default: '40' },
  },
});
const SECONDS = Number(args.seconds);
const EVENTS = Number(args.events);
const pgUrl = process.env.DATABASE_URL?.startsWith('postgres') ? process.env.DATABASE_URL : undefined;
const dialect = pgUrl ? 'postgres' : 'sqlite';
const sqliteFile = 'bench/out/events.db';
const APP_SECRET = 'bench-app-secret';

const ms = (n: number) => `${n.toFixed(1)} ms`;
function summary(samples: number[]) {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (p: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? NaN;
  return { p50: at(0.5), p99: at(0.99), max: sorted.at(-1) ?? NaN };
}

/** The process's CPU time (user + system) in seconds, from /proc/<pid>/stat. */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

async function cpuShare(pid: number, seconds: number): Promise<number> {
  const before = cpuSeconds(pid);
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  return (cpuSeconds(pid) - before) / seconds;
}

/** The worst and median time of `probe`, run one after another until `during` settles. */
async function waitsDuring(probe: () => Promise<unknown>, during: Promise<unknown>) {
  let done = false;
  void during.finally(() => (done = true));
  const samples: number[] = [];
  while (!done) {
    const started = performance.now();
    await probe();
    samples.push(performance.now() - started);
  }
  return summary(samples);
}

function repliesBody(count: number, size: number): string {
  return JSON.stringify({
    object: 'whatsapp_business_account',
    entry: [
      {
        id: '102290129340398',
        changes: [
          {
            field: 'messages',
            value: {
              messaging_product: 'whatsapp',
              metadata: { display_phone_number: '15550001234', phone_number_id: '106540352242922' },
              messages: Array.from({ length: count }, (_, i) => ({
                from: `9198${String(i).padStart(8, '0')}`,
                id: `wamid.bench.${Date.now()}.${i}`,
                timestamp: '1764093000',
                type: 'text',
                text: { body: `reply ${i} `.padEnd(size, 'x') },
              })),
            },
          },
        ],
      },
    ],
  });
}

async function register(base: string, name: string) {
  const res = await api(base, 'POST', '/auth/register', undefined, {
    name,
    email: `${name.toLowerCase().replace(/\W/g, '')}.${Date.now()}@example.com`,
    password: 'correct horse battery',
    phone: `+9199${String(Math.floor(Math.random() * 1e8)).padStart(8, '0')}`,
  });
  return res.access_token as string;
}

async function main(): Promise<void> {
  mkdirSync('bench/out', { recursive: true });
  if (!pgUrl) for (const suffix of ['', '-wal', '-shm']) rmSync(`${sqliteFile}${suffix}`, { force: true });
  const port = await freePort();
  const child: ChildProcess = spawnNpmStart({
    DATABASE_URL: pgUrl ?? `sqlite:${sqliteFile}`,
    PORT: String(port),
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    EVENT_STREAMS_PER_USER: '600',
    RATE_LIMIT_AUTHENTICATED_PER_MIN: '1000000',
    RATE_LIMIT_PUBLIC_PER_MIN: '1000000',
    RATE_LIMIT_CALLBACK_PER_MIN: '1000000',
    QUIET_HOURS: '',
  });
  const lines: string[] = [];
  const say = (line: string) => (console.log(line), lines.push(line));
  try {
    const base = `http://127.0.0.1:${port}/api`;
    await waitUntilUp(`${base}/healthz`);
    const pid = child.pid!;
    const token = await register(base, 'Bench Office');

    // 1. CPU of idle streams.
    const streams: Stream[] = [];
    const cpu: Array<[number, number]> = [];
    for (const target of [0, 1, 200, 500]) {
      while (streams.length < target) streams.push(await openStream(base, token));
      await new Promise((resolve) => setTimeout(resolve, 1000));
      cpu.push([target, await cpuShare(pid, SECONDS)]);
      say(`1. ${target} idle streams: ${(cpu.at(-1)![1] * 100).toFixed(2)}% of a core`);
    }

    // 2. A reply reaching 500 streams.
    const posts: number[] = [];
    const sent = new Map<string, number>();
    for (let i = 0; i < EVENTS; i += 1) {
      const marker = `bench-${i}`;
      const started = performance.now();
      sent.set(marker, started);
      await api(base, 'POST', '/inbound', token, {
        channel: 'sms',
        from: `+9198765${String(i).padStart(5, '0')}`,
        body: marker,
      });
      posts.push(performance.now() - started);
      await new Promise((resolve) => setTimeout(resolve, 150 + Math.random() * 100));
    }
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const latencies: number[] = [];
    let missing = 0;
    for (const stream of streams)
      for (const [marker, at] of sent) {
        const arrived = stream.arrivals.get(marker);
        if (arrived === undefined) missing += 1;
        else latencies.push(arrived - at);
      }
    for (const stream of streams) stream.close();
    const reach = summary(latencies);
    const post = summary(posts);
    say(
      `2. ${EVENTS} replies to ${streams.length} streams: ${latencies.length} arrivals, ${missing} missing; p50 ${ms(reach.p50)}, p99 ${ms(reach.p99)}; the POST alone p50 ${ms(post.p50)}, p99 ${ms(post.p99)}`,
    );

    // 3. Another workspace's wait during a 1 MB callback.
    const account = await api(base, 'POST', '/channel-accounts', token, {
      name: 'WhatsApp',
      provider: 'whatsapp_cloud',
      settings: { phone_number_id: '106540352242922', waba_id: '102290129340398' },
      credentials: { access_token: 'EAAG-bench', app_secret: APP_SECRET },
    });
    const webhook = new URL((account.callback_urls as { webhook: string }).webhook).pathname;
    const other = await register(base, 'Other Office');
    const probe = () => api(base, 'GET', '/voters?per_page=5', other);
    const idle = await waitsDuring(probe, new Promise((resolve) => setTimeout(resolve, 3000)));
    const raw = repliesBody(1000, 850);
    const signature = `sha256=${createHmac('sha256', APP_SECRET).update(raw).digest('hex')}`;
    const callback = fetch(`http://127.0.0.1:${port}${webhook}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-hub-signature-256': signature },
      body: raw,
    }).then(async (res) => ({ status: res.status, body: await res.text() }));
    const started = performance.now();
    const during = await waitsDuring(probe, callback);
    const took = performance.now() - started;
    const answer = await callback;
    say(
      `3. a ${(raw.length / 1e6).toFixed(2)} MB callback (1,000 replies, answered ${answer.status} in ${ms(took)}): another workspace's wait p50 ${ms(during.p50)}, max ${ms(during.max)}; with no callback p50 ${ms(idle.p50)}, max ${ms(idle.max)}`,
    );

    const [zero] = cpu;
    const table = [
      `# bench:events (${dialect}), ${new Date().toISOString()}`,
      '',
      '| measure | figure | reference |',
      '| --- | --- | --- |',
      ...cpu
        .slice(1)
        .map(
          ([n, share]) =>
            `| CPU with ${n} idle streams (${SECONDS} s) | ${(share * 100).toFixed(2)}% of a core | ${(zero![1] * 100).toFixed(2)}% with none |`,
        ),
      `| a reply on ${streams.length} streams (${latencies.length} arrivals, ${missing} missing) | p50 ${ms(reach.p50)}, p99 ${ms(reach.p99)} | the POST alone p99 ${ms(post.p99)} |`,
      `| another workspace's worst wait during a 1 MB callback | ${ms(during.max)} (p50 ${ms(during.p50)}) | ${ms(idle.max)} with none |`,
    ];
    writeFileSync(`bench/out/events-${dialect}.md`, `${table.join('\n')}\n`);
    console.log(table.join('\n'));
  } finally {
    child.kill('SIGTERM');
  }
}

await main();
