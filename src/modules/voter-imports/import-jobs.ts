import { randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../../config.ts';
import type { Db } from '../../db/connect.ts';
import { nowIso } from '../../db/connect.ts';
import type { VoterImportRow } from '../../db/schema.ts';
import { AppError, notFound } from '../../errors.ts';
import type { Download } from '../../http/download.ts';
import { pageResult } from '../../domain.ts';
import { csvField } from '../../lib/csv.ts';
import { recordAudit } from '../audit/audit.repository.ts';
import {
  deleteImportJobs,
  findImportJob,
  finishedImportJobsBefore,
  importJobStatuses,
  insertImportJob,
  listImportJobs,
  updateHeldJob,
} from './import-jobs.repository.ts';
import { type ImportFileStore, importFileStore } from './import-store.ts';
import {
  type FailedRowSink,
  type ImportResult,
  type ImportSource,
  readError,
  tooLarge,
  VoterImporter,
  type ImportMapping,
} from './voter-imports.ts';
import { importJobRef, parseRef } from '../../refs.ts';

/** `imp_<n>` -> n; anything else names no job (404). */
function parseJobId(publicId: string): number {
  const id = parseRef('imp', publicId);
  if (id === undefined) throw notFound('Import job');
  return id;
}

export function importJobView(row: VoterImportRow) {
  return {
    id: importJobRef(Number(row.id)),
    status: row.status,
    file_name: row.file_name,
    bytes: Number(row.bytes),
    progress: { bytes_read: Number(row.bytes_read), rows_read: Number(row.rows_read) },
    imported: Number(row.imported),
    updated: Number(row.updated),
    failed: Number(row.failed),
    errors: JSON.parse(row.errors) as ImportResult['errors'],
    warnings: JSON.parse(row.warnings) as ImportResult['warnings'],
    unknown_places: JSON.parse(row.unknown_places) as ImportResult['unknown_places'],
    ignored_columns: JSON.parse(row.ignored_columns) as string[],
    message: row.message,
    created_at: row.created_at,
    started_at: row.started_at,
    finished_at: row.finished_at,
  };
}

/** What a running job is told by the loop that holds it. */
export interface HeldJob {
  owner: string;
  /** The lease went to another worker: stop, write nothing more. */
  lost(): boolean;
  /** The process is shutting down: stop and hand the job back. */
  stopping(): boolean;
}

class Interrupted extends Error {}

/** Unexpected failures (database down, ...) are retried this many times before the job is failed. */
const MAX_ATTEMPTS = 3;
/** Progress is written at most this often. */
const PROGRESS_EVERY_MS = 500;
/** Finished jobs deleted per pruning round (their files first, then the rows). */
const PRUNE_JOBS = 200;
/** Stored keys looked at per pruning round for leftovers. */
const PRUNE_KEYS = 500;
/**
 * A stored file of no job is a leftover once it is this old: before that it may be an upload still being
 * received (the file is written before its job's row).
 */
const UPLOAD_GRACE_MS = 60 * 60_000;

/** When a file key was made (`imp-<ms in base 36>-<uuid>`); 0 for a key of the first format (`imp-<uuid>`). */
function keyTime(key: string): number {
  const match = /^imp-([0-9a-z]{8,9})-[0-9a-f]{8}-/.exec(key);
  return match ? parseInt(match[1]!, 36) : 0;
}

/**
 * Import jobs (`Prefer: respond-async`): the upload is stored, a `voter_imports` row queued, and a background
 * loop (src/jobs/voter-imports.ts) runs the same VoterImporter over the stored file, writing progress, the
 * counts, the first errors and an errors.csv of the failed rows.
 */
export class VoterImportJobs {
  private readonly store: ImportFileStore;

  constructor(
    private readonly deps: {
      db: Db;
      importer: VoterImporter;
      maxBytes: number;
      log?: { error(obj: object, msg: string): void; warn(obj: object, msg: string): void };
    },
  ) {
    this.store = importFileStore(deps.db);
  }

  /** Removes a stored upload; one that cannot be removed now is logged, and the retention chore removes it. */
  private async removeUpload(key: string): Promise<void> {
    try {
      await this.store.remove(key);
    } catch (error) {
      this.deps.log?.warn(
        { err: error },
        'a stored voter upload could not be removed yet; the retention chore will',
      );
    }
  }

  /** Stores the upload and queues its job. */
  async enqueue(
    workspaceId: number,
    actor: { userId: number | null; ip: string | null },
    fileName: string,
    source: ImportSource,
    mapping?: ImportMapping,
    language?: string,
  ) {
    const { maxBytes, db } = this.deps;
    const key = `imp-${Date.now().toString(36)}-${randomUUID()}`;
    const writer = await this.store.writer(key);
    let bytes = 0;
    try {
      try {
        for await (const chunk of source.stream) {
          bytes += chunk.length;
          if (bytes > maxBytes || source.truncated()) throw tooLarge(maxBytes);
          await writer.write(chunk);
        }
      } catch (error) {
        throw readError(error, maxBytes);
      }
      if (source.truncated()) throw tooLarge(maxBytes);
      await writer.end();
    } catch (error) {
      // The upload already failed: that error is the one thrown, whatever closing and removing its part say.
      await writer.end().catch(() => {});
      await this.removeUpload(key);
      throw error;
    }
    const row = await insertImportJob(db.kysely, {
      workspace_id: workspaceId,
      user_id: actor.userId,
      ip: actor.ip ? actor.ip.slice(0, 100) : null,
      status: 'queued',
      file_name: (fileName || 'voters.csv').slice(0, 255),
      file_key: key,
      bytes,
      // The upload's options, applied when the job runs: its mapping, and the language of its rows.
      mapping:
        mapping || language ? JSON.stringify({ mapping: mapping ?? null, language: language ?? null }) : null,
      created_at: nowIso(),
    });
    return importJobView(row);
  }

  async get(workspaceId: number, publicId: string) {
    const row = await findImportJob(this.deps.db.kysely, workspaceId, parseJobId(publicId));
    if (!row) throw notFound('Import job');
    return importJobView(row);
  }

  async list(workspaceId: number, page: number, perPage: number) {
    const { rows, total } = await listImportJobs(this.deps.db.kysely, workspaceId, page, perPage);
    return pageResult(rows.map(importJobView), total, page, perPage);
  }

  /** The job's errors.csv: the file's header and each failed row as it was, with a last column `error`. */
  async errorsFile(workspaceId: number, publicId: string): Promise<Download> {
    const job = await this.get(workspaceId, publicId);
    if (job.status !== 'completed' && job.status !== 'failed')
      throw new AppError('conflict', `The import job ${job.id} has not finished yet (it is ${job.status}).`);
    const row = (await findImportJob(this.deps.db.kysely, workspaceId, parseJobId(publicId)))!;
    const store = this.store;
    async function* body(): AsyncGenerator<Uint8Array> {
      let any = false;
      try {
        for await (const chunk of store.read(`${row.file_key}.errors`)) {
          if (chunk.length === 0) continue;
          any = true;
          yield chunk;
        }
      } catch (error) {
        if ((error as { code?: string }).code !== 'ENOENT') throw error;
      }
      if (!any) yield Buffer.from('error\n');
    }
    return { contentType: 'text/csv; charset=utf-8', filename: `${job.id}-errors.csv`, body: body() };
  }

  /** Runs a claimed job to its end (or hands it back when interrupted). */
  async run(job: VoterImportRow, held: HeldJob): Promise<void> {
    const { db, importer } = this.deps;
    const id = Number(job.id);
    const errorsKey = `${job.file_key}.errors`;
    await this.store.remove(errorsKey);
    const writer = await this.store.writer(errorsKey);
    let pending = '';
    const line = (fields: string[]) => `${fields.map(csvField).join(',')}\n`;
    const failures: FailedRowSink = {
      header: (fields) => {
        pending += line([...fields, 'error']);
      },
      row: (fields, error) => {
        pending += line([...fields, error]);
      },
    };
    const flush = async () => {
      if (pending === '') return;
      const bytes = Buffer.from(pending, 'utf8');
      pending = '';
      await writer.write(bytes);
    };
    let lastWrite = 0;
    let rowsRead = 0;
    const progress = async (p: { bytes_read: number; rows_read: number }) => {
      rowsRead = p.rows_read;
      if (held.stopping() || held.lost()) throw new Interrupted();
      if (pending.length >= 1 << 16) await flush();
      if (Date.now() - lastWrite >= PROGRESS_EVERY_MS) {
        lastWrite = Date.now();
        if (!(await updateHeldJob(db.kysely, id, held.owner, p))) throw new Interrupted();
      }
    };
    let result: ImportResult;
    try {
      result = await importer.run(
        Number(job.workspace_id),
        { stream: this.store.read(job.file_key), truncated: () => false },
        {
          progress,
          failures,
          ...jobOptions(job.mapping),
        },
      );
      await flush();
      await writer.end();
    } catch (error) {
      await writer.end().catch(() => {});
      await this.interrupted(job, held, error);
      return;
    }
    const finished = await this.complete(job, held, result, rowsRead);
    // Only once `completed` is committed, and only by the job's holder: a worker that lost the lease leaves the
    // upload to the one now running the job. A crash in between leaves a leftover that prune() removes.
    if (finished) await this.removeUpload(job.file_key);
  }

  /** Marks the job completed and audits it, if this worker still holds it; false when another took it over. */
  private async complete(
    job: VoterImportRow,
    held: HeldJob,
    result: ImportResult,
    rowsRead: number,
  ): Promise<boolean> {
    const id = Number(job.id);
    const done = nowIso();
    return this.deps.db.kysely.transaction().execute(async (trx) => {
      const stillHeld = await updateHeldJob(trx, id, held.owner, {
        status: 'completed',
        bytes_read: Number(job.bytes),
        rows_read: rowsRead,
        imported: result.imported,
        updated: result.updated,
        failed: result.failed,
        errors: JSON.stringify(result.errors),
        warnings: JSON.stringify(result.warnings),
        unknown_places: JSON.stringify(result.unknown_places),
        ignored_columns: JSON.stringify(result.ignored_columns),
        message: null,
        finished_at: done,
        lease_owner: null,
        lease_until: null,
      });
      if (!stillHeld) return false;
      await recordAudit(trx, {
        workspaceId: Number(job.workspace_id),
        actor: { userId: job.user_id === null ? null : Number(job.user_id), ip: job.ip },
        action: 'voters.imported',
        target: { type: 'voter_import', id: importJobRef(id) },
        details: {
          file_name: job.file_name,
          imported: result.imported,
          updated: result.updated,
          failed: result.failed,
        },
      });
      return true;
    });
  }

  /** A job that did not finish: failed (the file is refused, or retries are spent), or handed back. */
  private async interrupted(job: VoterImportRow, held: HeldJob, error: unknown): Promise<void> {
    const { db, log } = this.deps;
    const id = Number(job.id);
    if (error instanceof Interrupted || held.lost() || held.stopping()) {
      if (!held.lost())
        await updateHeldJob(db.kysely, id, held.owner, {
          status: 'queued',
          lease_owner: null,
          lease_until: null,
        });
      return;
    }
    const refused = error instanceof AppError && error.statusCode < 500;
    if (!refused) log?.error({ err: error, job: importJobRef(id) }, 'voter import job failed');
    if (!refused && Number(job.attempts) < MAX_ATTEMPTS) {
      // Another try once the lease has run out (or at once by another round of this worker).
      await updateHeldJob(db.kysely, id, held.owner, {
        status: 'queued',
        lease_owner: null,
        lease_until: null,
      });
      return;
    }
    const failed = await updateHeldJob(db.kysely, id, held.owner, {
      status: 'failed',
      message: refused
        ? (error as AppError).message
        : 'The import could not be run because of a server error; nothing of it was applied. Upload the file again.',
      finished_at: nowIso(),
      lease_owner: null,
      lease_until: null,
    });
    if (failed) await this.removeUpload(job.file_key);
  }

  /**
   * Retention, one bounded round (the worker's chore): jobs finished more than `retentionDays` ago are deleted
   * with their errors.csv, and stored files no queued or running job needs (an upload whose removal a crash
   * cut short, a file of no job) are removed. Returns how many jobs and files went, and whether the walk over
   * the stored keys reached their end in this round (`lap`).
   */
  async prune(
    retentionDays: number,
    nowMs = Date.now(),
  ): Promise<{ jobs: number; files: number; lap: boolean }> {
    const { db } = this.deps;
    const cutoff = new Date(nowMs - retentionDays * 86_400_000).toISOString();
    const old = await finishedImportJobsBefore(db.kysely, cutoff, PRUNE_JOBS);
    for (const job of old) {
      await this.store.remove(`${job.file_key}.errors`);
      await this.store.remove(job.file_key);
    }
    await deleteImportJobs(
      db.kysely,
      old.map((job) => Number(job.id)),
    );

    // Leftovers: the stored keys are walked PRUNE_KEYS at a time from where the last round stopped.
    const keys = await this.store.keys(this.pruneAfter, PRUNE_KEYS);
    this.pruneAfter = keys.length < PRUNE_KEYS ? '' : keys[keys.length - 1]!;
    const jobKey = (key: string) => key.replace(/\.errors$/, '');
    const statuses = await importJobStatuses(db.kysely, [...new Set(keys.map(jobKey))]);
    let files = 0;
    for (const key of keys) {
      const status = statuses.get(jobKey(key));
      const leftover =
        status === undefined
          ? nowMs - keyTime(key) > UPLOAD_GRACE_MS
          : (status === 'completed' || status === 'failed') && !key.endsWith('.errors');
      if (!leftover) continue;
      await this.store.remove(key);
      files += 1;
    }
    return { jobs: old.length, files, lap: this.pruneAfter === '' };
  }

  private pruneAfter = '';
}

/** The import's objects, built the same way by the API (its routes) and by the background loop. */
export function buildVoterImports(deps: { db: Db; config: Readonly<Config>; log: FastifyBaseLogger }) {
  const { db, config, log } = deps;
  const importer = new VoterImporter({
    db,
    defaultCountry: config.defaultCountry,
    maxBytes: config.import.maxBytes,
    maxErrors: config.import.maxErrors,
    appKey: config.appKey,
  });
  return { importer, jobs: new VoterImportJobs({ db, importer, maxBytes: config.import.maxBytes, log }) };
}

/** A job's stored upload options (`voter_imports.mapping`: `{ mapping, language }`). */
function jobOptions(text: string | null): { mapping?: ImportMapping; language?: string } {
  if (!text) return {};
  const stored = JSON.parse(text) as { mapping?: ImportMapping | null; language?: string | null };
  return {
    ...(stored.mapping ? { mapping: stored.mapping } : {}),
    ...(stored.language ? { language: stored.language } : {}),
  };
}
