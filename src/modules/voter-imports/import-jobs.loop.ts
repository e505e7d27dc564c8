import { randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import { nowIso } from '../../db/connect.ts';
import { PollLoop } from '../../lib/poll-loop.ts';
import type { Db } from '../../db/connect.ts';
import { claimImportJob, updateHeldJob } from './import-jobs.repository.ts';
import type { VoterImportJobs } from './import-jobs.ts';

export interface VoterImportLoopDeps {
  db: Db;
  jobs: VoterImportJobs;
  log: Pick<FastifyBaseLogger, 'warn' | 'error'>;
  /** How often an idle loop looks for a queued job. */
  pollMs?: number;
  /** How long a claim holds without a heartbeat; a worker that dies leaves its job to be claimed after it. */
  leaseMs?: number;
  workerId?: string;
  /** Run only these workspaces' jobs (tests sharing one database). Default: all. */
  workspaceIds?: readonly number[];
  /** IMPORT_JOB_RETENTION_DAYS: finished jobs older than this are deleted with their files. Default: 30. */
  retentionDays?: number;
}

/** How often an idle loop prunes (retention and leftover files). */
const PRUNE_EVERY_MS = 60_000;

/**
 * The voter import job loop: claims one queued job at a time under a lease (renewed by a heartbeat while it
 * runs) and runs it. A job whose worker stopped without handing it back (a crash, a kill) is claimed again
 * once its lease has run out and runs again from its stored file (the import is an upsert: nothing doubles).
 */
export class VoterImportLoop {
  readonly workerId: string;
  private readonly poll: PollLoop;
  private prunedAt = 0;

  constructor(private readonly deps: VoterImportLoopDeps) {
    this.workerId = deps.workerId ?? `imports:${randomUUID()}`;
    this.poll = new PollLoop({
      name: 'voter import',
      round: async () => {
        const ran = await this.runOnce();
        if (!ran && Date.now() - this.prunedAt >= PRUNE_EVERY_MS) {
          this.prunedAt = Date.now();
          await this.prune();
        }
        return ran;
      },
      log: deps.log,
      pollMs: deps.pollMs ?? 1000,
    });
  }

  private get leaseMs(): number {
    return this.deps.leaseMs ?? 60_000;
  }

  start(): void {
    this.poll.start();
  }

  /** Stops claiming; a job in progress stops at its next chunk and is handed back (queued again). */
  async stop(): Promise<void> {
    await this.poll.stop();
  }

  /** The retention chore, one bounded round: old finished jobs with their errors.csv, and leftover files. */
  prune(nowMs = Date.now()) {
    return this.deps.jobs.prune(this.deps.retentionDays ?? 30, nowMs);
  }

  /** Claims and runs one job; false when none was waiting. */
  async runOnce(): Promise<boolean> {
    const { db, jobs, workspaceIds } = this.deps;
    const owner = this.workerId;
    const job = await claimImportJob(db.kysely, owner, Date.now(), this.leaseMs, nowIso(), workspaceIds);
    if (!job) return false;
    let lost = false;
    const heartbeat = setInterval(
      () => {
        updateHeldJob(db.kysely, Number(job.id), owner, { lease_until: Date.now() + this.leaseMs })
          .then((held) => {
            if (!held) lost = true;
          })
          // One renewal that fails is not the end of the lease (a third of it is left): the next one tries again.
          .catch((error: unknown) => this.deps.log.warn({ err: error }, 'voter import lease renewal failed'));
      },
      Math.max(50, Math.floor(this.leaseMs / 3)),
    );
    try {
      await jobs.run(job, {
        owner,
        lost: () => lost,
        stopping: () => this.poll.stopping,
      });
    } finally {
      clearInterval(heartbeat);
    }
    return true;
  }
}
