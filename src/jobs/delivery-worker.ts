import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config.ts';
import { type Db, nowIso } from '../db/connect.ts';
import type { MessageRow } from '../db/schema.ts';
import { CampaignsService } from '../modules/campaigns/campaigns.service.ts';
import { messageRef } from '../modules/messages/messages.rules.ts';
import { MessagesService } from '../modules/messages/messages.service.ts';
import { pruneVoterChanges } from '../modules/voters/voters.repository.ts';
import {
  claimDue,
  dueSettlements,
  type Handover,
  releaseClaims,
  scheduleRetry,
} from '../modules/messages/outbox.repository.ts';
import { channels, ProviderError, type Providers, type StatusReport } from '../providers/provider.ts';
import { Pace } from './pace.ts';

type WorkerConfig = Pick<Config, 'delivery' | 'defaultCountry' | 'broadcastMaxRecipients'>;

/**
 * Handovers are recorded every MARK_EVERY messages or MARK_AFTER_MS, whichever comes first, and before any
 * wait for a provider's pace: this bounds what a crash could send twice (one message for a provider that
 * takes longer than MARK_AFTER_MS per send, at most MARK_EVERY for the instant sandbox).
 */
const MARK_EVERY = 1000;
const MARK_AFTER_MS = 20;
/** How often a worker forgets logged voter changes past their time (see pruneVoterChanges). */
const PRUNE_EVERY_MS = 60_000;

/**
 * The delivery loop. Each round: start scheduled campaigns that are due, fill the outbox of a queued
 * campaign, claim a batch of due messages (a lease; FOR UPDATE SKIP LOCKED on PostgreSQL) and hand them to
 * their providers at each provider's pace, retry provider errors on the schedule and then fail them
 * (refunding), settle sandbox deliveries, and complete drained campaigns. Any number of workers may run
 * against PostgreSQL; on SQLite, one in the API process.
 */
export class DeliveryWorker {
  readonly id = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  readonly messages: MessagesService;
  readonly campaigns: CampaignsService;
  private running = false;
  private loop: Promise<void> | undefined;
  private wake: (() => void) | undefined;
  private readonly paces = new Map<string, Pace>();
  private prunedAt = 0;

  constructor(
    private readonly deps: {
      db: Db;
      config: WorkerConfig;
      providers: Providers;
      log: FastifyBaseLogger;
    },
  ) {
    const { db, config, providers, log } = deps;
    this.messages = new MessagesService({ db: db.kysely, config, providers, log });
    this.campaigns = new CampaignsService({ db: db.kysely, config, log });
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.deps.log.info({ worker: this.id }, 'delivery worker started');
    this.loop = this.run();
  }

  /** Stops after the message being sent, and releases this worker's unsent claims for the next worker. */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    this.wake?.();
    await this.loop;
    const released = await releaseClaims(this.deps.db.kysely, this.id, nowIso());
    this.deps.log.info({ worker: this.id, released }, 'delivery worker stopped');
  }

  /** Runs rounds until one finds nothing to do (tests and the benchmark). */
  async drain(): Promise<void> {
    while (await this.round()) {
      // keep going
    }
  }

  private async run(): Promise<void> {
    while (this.running) {
      let busy = false;
      try {
        busy = await this.round();
      } catch (error) {
        this.deps.log.error({ err: error, worker: this.id }, 'delivery round failed');
      }
      if (!busy && this.running) await this.sleep(this.deps.config.delivery.pollMs);
      // SQLite calls resolve synchronously: let the API process's requests in between rounds.
      else await new Promise((resolve) => setImmediate(resolve));
    }
  }

  /** One round of every duty; true when any of them found work. */
  async round(): Promise<boolean> {
    if (Date.now() - this.prunedAt >= PRUNE_EVERY_MS) {
      this.prunedAt = Date.now();
      await pruneVoterChanges(this.deps.db.kysely);
    }
    const started = await this.campaigns.startDue();
    const filled = await this.campaigns.fillNext();
    const sent = await this.sendBatch();
    const settled = await this.settle();
    if (sent < this.batchSize()) await this.campaigns.completeDrained();
    return started > 0 || filled || sent > 0 || settled > 0;
  }

  private batchSize(): number {
    const { batchSize, leaseSeconds, sendRate } = this.deps.config.delivery;
    // A batch must go out well within the lease, or another worker would take it over.
    const rates = Object.values(sendRate).filter((r) => r > 0);
    const slowest = rates.length > 0 ? Math.min(...rates) : 0;
    return slowest > 0
      ? Math.max(1, Math.min(batchSize, Math.floor((slowest * leaseSeconds) / 2)))
      : batchSize;
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

  private async sendBatch(): Promise<number> {
    const { db, config, providers } = this.deps;
    const now = nowIso();
    const leaseUntil = new Date(Date.now() + config.delivery.leaseSeconds * 1000).toISOString();
    const rows = await claimDue(db.kysely, db.dialect, this.id, now, leaseUntil, this.batchSize());
    let handovers: Handover[] = [];
    let markedAt = performance.now();
    const mark = async () => {
      await this.messages.handedOver(handovers);
      handovers = [];
      markedAt = performance.now();
    };
    const failures = new Map<string, number[]>();
    for (const row of rows) {
      if (!this.running && this.loop) break; // stopping: the rest is released
      const provider = providers[row.channel];
      const pace = this.pace(provider.name);
      if (handovers.length > 0 && pace.wouldWait()) await mark();
      await pace.take();
      try {
        const result = await provider.send(outgoing(row));
        handovers.push({ id: row.id, provider: provider.name, providerMessageId: result.providerMessageId });
      } catch (error) {
        const reason = (error instanceof Error ? error.message : String(error)).slice(0, 300);
        const retryable = error instanceof ProviderError ? error.retryable : true;
        const schedule = config.delivery.retrySchedule;
        if (retryable && row.attempts <= schedule.length) {
          const delay = (schedule[row.attempts - 1] ?? 0) * 1000;
          await scheduleRetry(
            db.kysely,
            row.id,
            this.id,
            new Date(Date.now() + delay).toISOString(),
            reason,
            nowIso(),
          );
        } else {
          failures.set(reason, [...(failures.get(reason) ?? []), row.id]);
        }
      }
      if (handovers.length >= MARK_EVERY || performance.now() - markedAt >= MARK_AFTER_MS) await mark();
    }
    await mark();
    for (const [reason, ids] of failures) await this.messages.fail(ids, reason);
    return rows.length;
  }

  /** Providers that settle by age (the sandbox): their sent messages are delivered or failed once due. */
  private async settle(): Promise<number> {
    const { db, providers } = this.deps;
    let settled = 0;
    for (const channel of channels) {
      const provider = providers[channel];
      const settlement = provider.settlement;
      if (!settlement) continue;
      const cutoff = new Date(Date.now() - settlement.afterMs).toISOString();
      const due = await dueSettlements(db.kysely, channel, provider.name, cutoff, this.batchSize() * 2);
      const reports: StatusReport[] = due.map((m) => {
        const status = settlement.outcome(m.to);
        return {
          messageId: m.id,
          status,
          error: status === 'failed' ? 'The sandbox provider fails this recipient.' : undefined,
        };
      });
      await this.messages.applyReports(reports);
      settled += due.length;
    }
    return settled;
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wake = done;
    });
  }
}

function outgoing(row: MessageRow) {
  return {
    channel: row.channel,
    to: row.to,
    body: row.body,
    subject: row.subject ?? undefined,
    mediaUrl: row.media_url ?? undefined,
    templateId: row.template_id ?? undefined,
    reference: messageRef(row.id),
  };
}
