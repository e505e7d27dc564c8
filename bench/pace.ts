/**
 * npm run bench:pace [-- --rate 50 --seconds 15 --processes 2]
 *
 * An account's `send_rate_per_second` held across processes (the fourth part's "Seams": over any 10 s window
 * the messages handed to one account never exceed its rate by more than 10%, across every process). Starts
 * `--processes` OS processes that each take from the same account's AccountPace through Redis (REDIS_URL, default
 * redis://127.0.0.1:6379) as fast as it lets them, in batches of 1 to 5 messages (a batch takes its size), and
 * record when each batch may go. Reports, over the merged hand-overs: the most messages in any sliding 10 s and
 * 1 s window against the rate's allowance (the reference: 1.00x is exactly the rate), and the whole run's rate.
 * Writes bench/out/pace.md.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { AccountPace } from '../src/modules/sending/accounts.ts';

const { values: args } = parseArgs({
  options: {
    rate: { type: 'string', default: '50' },
    seconds: { type: 'string', default: '15' },
    processes: { type: 'string', default: '2' },
    child: { type: 'string' },
    prefix: { type: 'string' },
  },
});
const RATE = Number(args.rate);
const SECONDS = Number(args.seconds);
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

if (args.child !== undefined) {
  // One process: take batches until the time is up, printing each hand-over as "<epoch ms> <size>".
  const redis = new Redis(redisUrl);
  const pace = new AccountPace({ redis, prefix: args.prefix! });
  const until = Date.now() + SECONDS * 1000;
  const lines: string[] = [];
  while (Date.now() < until) {
    const size = 1 + Math.floor(Math.random() * 5);
    await pace.take(1, RATE, size, 30_000);
    lines.push(`${Date.now()} ${size}`);
  }
  process.stdout.write(lines.join('\n') + '\n');
  redis.disconnect();
} else {
  const prefix = `bench-pace-${process.pid}-${Date.now()}:`;
  const outputs = await Promise.all(
    Array.from({ length: Number(args.processes) }, (_, i) => {
      const child = spawn(
        process.execPath,
        [
          '--import',
          'tsx',
          'bench/pace.ts',
          '--child',
          String(i),
          '--prefix',
          prefix,
          '--rate',
          String(RATE),
          '--seconds',
          String(SECONDS),
        ],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      );
      let text = '';
      child.stdout.on('data', (chunk: Buffer) => (text += chunk.toString()));
      return new Promise<string>((resolve, reject) =>
        child.on('exit', (code) =>
          code === 0 ? resolve(text) : reject(new Error(`child ${i} exited ${code}`)),
        ),
      );
    }),
  );
  const handed = outputs
    .flatMap((text) => text.trim().split('\n'))
    .filter(Boolean)
    .map((line) => line.split(' ').map(Number) as [number, number])
    .sort((a, b) => a[0] - b[0]);
  /** The most messages handed over in any window of `ms` that starts at a hand-over. */
  const most = (ms: number) => {
    let best = 0;
    let sum = 0;
    let j = 0;
    for (let i = 0; i < handed.length; i++) {
      sum += handed[i]![1];
      while (handed[j]![0] <= handed[i]![0] - ms) sum -= handed[j++]![1];
      best = Math.max(best, sum);
    }
    return best;
  };
  const total = handed.reduce((n, [, size]) => n + size, 0);
  const span = (handed.at(-1)![0] - handed[0]![0]) / 1000;
  const ten = most(10_000);
  const one = most(1_000);
  const rows = [
    ['any 10 s window', `${ten} messages`, `${(ten / (RATE * 10)).toFixed(3)}x`, '<= 1.10x'],
    ['any 1 s window', `${one} messages`, `${(one / RATE).toFixed(3)}x`, "(one second's batches)"],
    ['the whole run', `${total} in ${span.toFixed(1)} s`, `${(total / span / RATE).toFixed(3)}x`, ''],
  ];
  const report = [
    `# bench:pace (${args.processes} processes, rate ${RATE}/s, ${SECONDS} s, batches of 1-5, Redis)`,
    '',
    '| measure | handed over | against the rate | goal |',
    '| --- | --- | --- | --- |',
    ...rows.map((r) => `| ${r.join(' | ')} |`),
    '',
  ].join('\n');
  mkdirSync('bench/out', { recursive: true });
  writeFileSync('bench/out/pace.md', report);
  process.stdout.write(report);
  const cleanup = new Redis(redisUrl);
  await cleanup.del(`${prefix}pace:cha_1`);
  cleanup.disconnect();
}
