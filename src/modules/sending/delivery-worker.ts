import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../../config.ts';
import { type Db, nowIso } from '../../db/connect.ts';
import type { Redis } from 'ioredis';
import { AccountPace, AccountProviders, PaceUnavailable } from './accounts.ts';
import { CampaignDispatch } from '../campaigns/campaigns.dispatch.ts';
import { MessageLifecycle, settleSimulated } from './lifecycle.ts';
import { pruneAuditLog } from '../audit/audit.repository.ts';
import { DeliveryGate } from './gate.ts';
import {
  claimDueFairly,
  type Handover,
  releaseClaims,
  releaseUnsent,
  unconfirmedBefore,
  anyDue,
} from './outbox.repository.ts';
import { type Channel, channels, type Providers } from '../../providers/provider.ts';
import { channelLogFor } from './channel-log.ts';
import { handOver } from './hand-over.ts';
import {
  applyResults,
  CallTimes,
  callUnits,
  CHECK_AHEAD_MAX,
  CHECK_AHEAD_MS,
  checkStillQueued,
  Failures,
  type Unit,
} from './calls.ts';
import { Pace } from '../../providers/pace.ts';
import { accountRef } from '../../refs.ts';

type WorkerConfig = Pick<
  Config,
  | 'delivery'
  | 'defaultCountry'
  | 'broadcastMaxRecipients'
  | 'quietHours'
  | 'appKey'
  | 'publicBaseUrl'
  | 'port'
  | 'dltEnforce'
  | 'auditRetentionDays'
  | 'privacy'
  | 'providerEnv'
  | 'sandboxDeliveryDelayMs'
  | 'redisPrefix'
>;

/**
 * Handovers are recorded every MARK_EVERY messages or MARK_AFTER_MS, whichever comes first, and before a
 * wait for a provider's pace that would carry past MARK_AFTER_MS: this bounds what a crash could send twice (one message for a provider that
 * takes longer than MARK_AFTER_MS per send, at most MARK_EVERY for the instant sandbox). 5 ms rather than 20
 * narrowed that window fourfold at no measurable cost (bench:messaging, 300,000 messages on SQLite: 30,032
 * against 30,718 messages/s).
 */
const MARK_EVERY = 1000;
/** A claim for the deployment's paced provider holds this many seconds of its sends (batchSize). */
const PACED_CLAIM_SECONDS = 1;
/** How long a lane reuses its scan for the workspaces with due messages (a new one waits at most this). */
const WORKSPACE_SCAN_EVERY_MS = 1000;
const MARK_AFTER_MS = 5;
/** How often a worker deletes audit-log entries past AUDIT_RETENTION_DAYS and live events past an hour. */
const PRUNE_EVERY_MS = 60_000;

/**
 * The delivery loops. One claim loop per channel: claim a batch of that channel's due messages (a lease; FOR
 * UPDATE SKIP LOCKED on PostgreSQL), fairly between workspaces, skipping the lanes busy sending, and hand each
 * lane its share without waiting for it. A lane is one channel account, or the deployment's provider of the
 * channel: it sends at its own pace, each call limited to PROVIDER_TIMEOUT_MS and made only while the lease has
 * room for it (what cannot go in time is given back), retries provider errors on the schedule and then fails
 * them (refunding). A provider that hangs, or an account's low send rate, holds only its own lane. Beside the
 * claim loops, one loop does the rest: start scheduled campaigns that are due, fill the outbox of a queued
 * campaign, settle sandbox deliveries and complete drained campaigns. Any number of workers may run against
 * PostgreSQL; on SQLite, one in the API process.
 */
export class DeliveryWorker {
  readonly id = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  /** Messages handed over, delivered and failed (their credits and events with them). */
  readonly messages: MessageLifecycle;
  readonly campaigns: CampaignDispatch;
  /** Opt-outs, silence periods and quiet hours, checked on every claimed batch. */
  private readonly gate: DeliveryGate;
  private running = false;
  private loop: Promise<void> | undefined;
  private readonly wakers = new Set<() => void>();
  private readonly paces = new Map<string, Pace>();
  /**
   * The lanes sending now: a channel account's by its id, a channel's deployment provider by the channel's name.
   * The next claim skips them.
   */
  private readonly lanes = new Map<number | Channel, Promise<void>>();
  /** Per channel, the last workspace a claim served: the next scan starts after it (claimDueFairly). */
  private readonly fairCursor = new Map<Channel, number>();
  /** Per channel, the workspaces with due messages found by the last scan, and when. */
  private readonly dueWorkspaces = new Map<Channel, { ids: readonly number[]; at: number }>();
  private prunedAt = 0;
  /** Channel accounts' providers, and their send rates shared between processes. */
  private readonly accounts: AccountProviders;
  private readonly accountPace: AccountPace;

  constructor(
    private readonly deps: {
      db: Db;
      config: WorkerConfig;
      providers: Providers;
      log: FastifyBaseLogger;
      /** The time the consent rules go by (quiet hours, silence periods) and messages fall due; tests move it. */
      clock?: () => Date;
      /** Where channel accounts' send rates are shared between processes (REDIS_URL). */
      redis?: Redis | undefined;
      /**
       * Whether accounts' provider exchanges go to the channel log (default true). Only `bench:messaging
       * --log-compare` turns it off, to measure what the log costs a drain.
       */
      channelLog?: boolean;
    },
  ) {
    const { db, config, log } = deps;
    this.gate = new DeliveryGate({
      db: db.kysely,
      rules: {
        quietHours: config.quietHours,
        addressKey: config.appKey,
        requireConsent: config.privacy.requireConsent,
      },
    });
    this.accounts = new AccountProviders({ config, log });
    this.accountPace = new AccountPace({ redis: deps.redis, prefix: config.redisPrefix });
    this.messages = new MessageLifecycle(db.kysely);
    this.campaigns = new CampaignDispatch({ db: db.kysely, config, log });
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.deps.log.info({ worker: this.id }, 'delivery worker started');
    this.loop = this.run();
  }

  /** Stops after the messages being sent, and releases this worker's unsent claims for the next worker. */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    for (const wake of this.wakers) wake();
    await this.loop;
    await Promise.all(this.lanes.values());
    this.accounts.close();
    const released = await releaseClaims(this.deps.db.kysely, this.id, nowIso());
    this.deps.log.info({ worker: this.id, released }, 'delivery worker stopped');
  }

  /**
   * Runs rounds until one finds nothing to do and no message is due (tests and the benchmark). A round can hand
   * nothing over while a message is due (a claim that went by a workspace list a second old, say): drain()
   * does not take that for the end.
   */
  async drain(): Promise<void> {
    for (let idle = 0; idle < 20;) {
      if (await this.round()) idle = 0;
      else if (await anyDue(this.deps.db.kysely, (this.deps.clock?.() ?? new Date()).toISOString()))
        idle += 1;
      else return;
    }
  }

  private async run(): Promise<void> {
    await Promise.all([
      this.repeat('delivery round', () => this.chores()),
      ...channels.map((channel) =>
        this.repeat(`${channel} delivery`, async () => (await this.sendBatch(channel, false)) > 0),
      ),
    ]);
  }

  /** Runs `work` until stopped, resting WORKER_POLL_MS whenever it found nothing to do. */
  private async repeat(what: string, work: () => Promise<boolean>): Promise<void> {
    while (this.running) {
      let busy = false;
      try {
        busy = await work();
      } catch (error) {
        this.deps.log.error({ err: error, worker: this.id }, `${what} failed`);
      }
      if (!busy && this.running) await this.sleep(this.deps.config.delivery.pollMs);
      // SQLite calls resolve synchronously: let the API process's requests in between rounds.
      else await new Promise((resolve) => setImmediate(resolve));
    }
  }

  /** One round of every duty, every lane included; true when any of them found work (tests, drain). */
  async round(): Promise<boolean> {
    const before = await this.startAndFill();
    const sent = await Promise.all(channels.map((channel) => this.sendBatch(channel)));
    const after = await this.settleAndComplete(sent.every((n, i) => n < this.batchSize(channels[i]!)));
    return before || after || sent.some((n) => n > 0);
  }

  /** The duties beside the lanes; true when any found work. */
  private async chores(): Promise<boolean> {
    const before = await this.startAndFill();
    return (await this.settleAndComplete(true)) || before;
  }

  private async startAndFill(): Promise<boolean> {
    if (Date.now() - this.prunedAt >= PRUNE_EVERY_MS) {
      this.prunedAt = Date.now();
      // AUDIT_RETENTION_DAYS: bounded batches; a backlog goes over the next rounds.
      const keepMs = this.deps.config.auditRetentionDays * 86_400_000;
      await pruneAuditLog(this.deps.db.kysely, new Date(Date.now() - keepMs).toISOString());
      await this.failUnconfirmed();
    }
    const started = await this.campaigns.startDue();
    const filled = await this.campaigns.fillNext();
    return started > 0 || filled;
  }

  /** Messages whose provider never answered, with no report within UNCONFIRMED_AFTER_HOURS: failed, refunded. */
  async failUnconfirmed(): Promise<number> {
    const cutoff = new Date(Date.now() - this.deps.config.delivery.unconfirmedAfterMs).toISOString();
    const ids = await unconfirmedBefore(this.deps.db.kysely, cutoff, 1000);
    const hours = this.deps.config.delivery.unconfirmedAfterMs / 3_600_000;
    await this.messages.fail(
      ids,
      `The provider never answered the hand-over, and no delivery report came within ${hours} hours.`,
      'undeliverable',
    );
    return ids.length;
  }

  private async settleAndComplete(drained: boolean): Promise<boolean> {
    const settled = await this.settle();
    if (drained) await this.campaigns.completeDrained();
    return settled > 0;
  }

  /**
   * A claim's size: where the deployment's provider of the channel is paced, one second of its sends. That lane
   * is shared by every workspace and sends a claim to its end before the next claim: a larger claim (it was half
   * the lease's worth, 500 messages at 50 a second) kept another workspace's ten SMS waiting 19 s behind one
   * workspace's batch; now they wait at most one second of it, and the next claim shares the lane between them.
   */
  private batchSize(channel: Channel): number {
    const { batchSize } = this.deps.config.delivery;
    const rate = this.deploymentRate(channel);
    return rate > 0 ? Math.max(1, Math.min(batchSize, Math.ceil(rate * PACED_CLAIM_SECONDS))) : batchSize;
  }

  /** The send rate of the deployment's provider of the channel (0: unpaced). */
  private deploymentRate(channel: Channel): number {
    const rates = this.deps.config.delivery.sendRate as Record<string, number>;
    return rates[this.deps.providers[channel].name] ?? 0;
  }

  private rateOf(provider: string | undefined): number {
    return provider ? ((this.deps.config.delivery.sendRate as Record<string, number>)[provider] ?? 0) : 0;
  }

  private pace(provider: string): Pace {
    let pace = this.paces.get(provider);
    if (!pace) {
      const rates = this.deps.config.delivery.sendRate as Record<string, number>;
      pace = new Pace(rates[provider] ?? 0);
      this.paces.set(provider, pace);
    }
    return pace;
  }

  /**
   * A channel's claim: what is due on the channel for every lane that is idle (a lane is one channel account, or
   * the deployment's provider of the channel), shared fairly between workspaces, handed to each lane to send on
   * its own. A lane that waits on its pace or on a provider that hangs holds only its own messages: the next
   * claim skips it and serves the others. `wait`: return once the lanes have sent the claim (tests, drain).
   */
  private async sendBatch(channel: Channel, wait = true): Promise<number> {
    const { db, config } = this.deps;
    const { leaseSeconds } = config.delivery;
    const at = this.deps.clock?.() ?? new Date();
    const now = at.toISOString();
    const leaseEnds = Date.now() + leaseSeconds * 1000;
    const leaseUntil = new Date(leaseEnds).toISOString();
    const known = this.dueWorkspaces.get(channel);
    // A paced channel claims about once a second: each claim scans, so that a workspace whose messages just
    // came shares the next claim.
    const fresh =
      known !== undefined &&
      at.getTime() - known.at < WORKSPACE_SCAN_EVERY_MS &&
      this.deploymentRate(channel) === 0;
    const busy = {
      accounts: [...this.lanes.keys()].filter((key) => typeof key === 'number'),
      deployment: this.lanes.has(channel),
    };
    const {
      rows: claimed,
      last,
      workspaces,
    } = await claimDueFairly(
      db.kysely,
      db.dialect,
      this.id,
      now,
      leaseUntil,
      this.batchSize(channel),
      channel,
      this.fairCursor.get(channel) ?? 0,
      fresh ? known.ids : undefined,
      busy,
    );
    this.fairCursor.set(channel, last);
    // Scanned now and found some: kept for a second. Reused and nothing came of it: scan again next time.
    if (!fresh && workspaces.length > 0)
      this.dueWorkspaces.set(channel, { ids: workspaces, at: at.getTime() });
    else if (claimed.length === 0) this.dueWorkspaces.delete(channel);
    const { rows, extras } = await this.gate.screen(claimed, at, this.id);
    const failures = new Failures();
    const units = await callUnits(
      {
        db: this.deps.db.kysely,
        providers: this.deps.providers,
        accounts: this.accounts,
        config: this.deps.config,
      },
      channel,
      rows,
      extras,
      failures.add,
    );
    await failures.apply(this.messages);
    const byLane = new Map<number | Channel, Unit[]>();
    for (const unit of units) {
      const key = unit.account ? unit.account.id : channel;
      byLane.set(key, [...(byLane.get(key) ?? []), unit]);
    }
    const started: Promise<void>[] = [];
    for (const [key, laneUnits] of byLane) {
      const run = this.runLane(laneUnits, leaseEnds)
        .catch((error: unknown) =>
          this.deps.log.error(
            { err: error, worker: this.id, lane: typeof key === 'number' ? accountRef(key) : key },
            'lane failed',
          ),
        )
        .finally(() => {
          this.lanes.delete(key);
          // The channel's claim skipped this lane while it was busy: claim again now.
          for (const wake of this.wakers) wake();
        });
      this.lanes.set(key, run);
      started.push(run);
    }
    if (wait) await Promise.all(started);
    return claimed.length;
  }

  /** One lane's share of a claim: its provider calls one after another, at its pace, within the lease. */
  private async runLane(units: Unit[], leaseEnds: number): Promise<void> {
    const { db, config } = this.deps;
    const { leaseSeconds, providerTimeoutMs } = config.delivery;
    let handovers: Handover[] = [];
    let markedAt = performance.now();
    const mark = async () => {
      await this.messages.handedOver(handovers);
      handovers = [];
      markedAt = performance.now();
    };
    const failures = new Failures();
    /** The provider refused the account's credentials: its other messages fail without a call. */
    let refused: string | undefined;
    /** The last quarter of the lease is left for recording; a call may take PROVIDER_TIMEOUT_MS. */
    const lastCall = leaseEnds - (leaseSeconds * 1000) / 4 - providerTimeoutMs;
    const giveBack = async (from: number, dueAt = nowIso()) => {
      await mark();
      await releaseUnsent(
        db.kysely,
        units.slice(from).flatMap((u) => u.rows.map((r) => r.id)),
        this.id,
        nowIso(),
        dueAt,
      );
    };
    /** Units before this index were checked still queued (checkStillQueued) just before their calls. */
    let checkedUpTo = 0;
    const callTimes = new CallTimes();
    // A paced lane's calls are apart in time: it checks as many calls ahead as its pace makes in CHECK_AHEAD_MS
    // (one, for an account's few a second; a dozen for the deployment's 2,500 a second, not one UPDATE a message).
    const rate = units[0]?.account
      ? (units[0].account.send_rate_per_second ?? 0)
      : this.rateOf(units[0]?.provider.name);
    const pacedSpan = Math.max(1, Math.min(CHECK_AHEAD_MAX, Math.floor((rate * CHECK_AHEAD_MS) / 1000)));
    for (const [index, unit] of units.entries()) {
      if (!this.running && this.loop) break; // stopping: the rest is released
      const { provider, account } = unit;
      if (refused) {
        for (const row of unit.rows) failures.add(refused, 'auth_failed', row.id);
        continue;
      }
      const pace = account ? undefined : this.pace(provider.name);
      // Record before a wait that would hold the last hand-overs unrecorded past MARK_AFTER_MS (an account's
      // shared pace may wait: record first whenever it has a rate).
      const waits = pace ? pace.waitMs() : account?.send_rate_per_second ? 1000 : 0;
      if (handovers.length > 0 && performance.now() + waits - markedAt >= MARK_AFTER_MS) await mark();
      if (!(await this.takeTurn(unit, pace, lastCall))) {
        // No room in the account's rate within the lease (or Redis away): given back, due in a second.
        await giveBack(index, new Date(Date.now() + 1000).toISOString());
        break;
      }
      if (Date.now() > lastCall) {
        await giveBack(index);
        break;
      }
      // A cancel may have taken the messages since the claim: each call goes only with those still queued.
      if (index >= checkedUpTo) {
        const span = rate > 0 ? pacedSpan : callTimes.span();
        await checkStillQueued(db.kysely, units.slice(index, index + span), this.id);
        checkedUpTo = index + span;
      }
      if (unit.rows.length === 0) continue;
      const callStarted = performance.now();
      const message = unit.messages.length === 1 && !provider.sendMany ? unit.messages[0]! : unit.messages;
      const results = await handOver(
        provider,
        unit.rows.map((r) => r.id),
        message,
        providerTimeoutMs,
        this.logOf(unit),
      );
      callTimes.add(performance.now() - callStarted);
      refused = await applyResults(this.resultDeps(), unit, results, { handovers, failures, refused });
      if (handovers.length >= MARK_EVERY || performance.now() - markedAt >= MARK_AFTER_MS) await mark();
    }
    await mark();
    await failures.apply(this.messages);
  }

  /** What applyResults writes with. */
  private resultDeps() {
    return {
      db: this.deps.db.kysely,
      retrySchedule: this.deps.config.delivery.retrySchedule,
      workerId: this.id,
    };
  }

  /** Where a unit's call is kept in its account's channel log (the deployment's providers keep none). */
  private logOf(unit: Unit) {
    const { account } = unit;
    if (!account || this.deps.channelLog === false) return undefined;
    return {
      log: channelLogFor(this.deps.db.kysely),
      account,
      kind: unit.rows[0]?.survey_response_id != null ? ('survey' as const) : ('send' as const),
      secrets: this.accounts.secrets(account),
    };
  }

  /**
   * Waits for the unit's turn at its pace: the deployment provider's in this process, or the account's shared
   * one, bounded so that a call that could not be made (and recorded) within the lease is not made. False when
   * the account's rate has no room before `lastCall` (or Redis is away).
   */
  private async takeTurn(unit: Unit, pace: Pace | undefined, lastCall: number): Promise<boolean> {
    const { account } = unit;
    try {
      if (account)
        await this.accountPace.take(
          account.id,
          account.send_rate_per_second,
          unit.rows.length,
          Math.max(0, lastCall - Date.now()),
        );
      else await pace!.take();
      return true;
    } catch (error) {
      if (!(error instanceof PaceUnavailable)) throw error;
      return false;
    }
  }

  /** Simulated providers settle by age: their sent messages are delivered or failed once due. */
  private settle(): Promise<number> {
    const { db, providers, config } = this.deps;
    return settleSimulated(db.kysely, this.messages, {
      afterMs: (channel) => providers[channel].settlement?.afterMs ?? config.sandboxDeliveryDelayMs,
      batch: (channel) => this.batchSize(channel) * 2,
    });
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      const wakers = this.wakers;
      function done() {
        clearTimeout(timer);
        wakers.delete(done);
        resolve();
      }
      wakers.add(done);
    });
  }
}
