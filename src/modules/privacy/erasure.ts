import { type Kysely, type RawBuilder, sql } from 'kysely';
import { parsePhoneNumberFromString } from 'libphonenumber-js/min';
import type { Db } from '../../db/connect.ts';
import { nowIso } from '../../db/connect.ts';
import { isPostgres } from '../../db/dialect.ts';
import type { Database, VoterRow } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';
import { AppError } from '../../errors.ts';
import { importJobRef } from '../../refs.ts';
import { type AuditActor, recordAudit } from '../audit/audit.repository.ts';
import { erasedMark, isErasedMark } from '../opt-outs/opt-outs.rules.ts';
import { type ImportFileStore, importFileStore } from '../voter-imports/import-store.ts';
import { type ErasureRecord, findRequest, requestRef, requestView } from './privacy.service.ts';

/** What a person is known by: addresses and the EPIC number anywhere; their name only in rows about them. */
export interface Person {
  voter: VoterRow | undefined;
  /** Phones (E.164) and emails. */
  addresses: string[];
  /** Matched in any row: the addresses, a phone's national number, the EPIC number. */
  strong: string[];
  /** Replaced only in rows that also hold a strong identifier or are linked to the voter: the names. */
  weak: string[];
}

const ERASED = '[erased]';

/** Tables the sweep leaves alone: the voter's own row is deleted, and these hold no text of a person. */
const UNSWEPT = new Set([
  'voters',
  'voter_search',
  'opt_outs',
  'privacy_codes',
  'voter_counts',
  // The office's own team: a member's account is not a voter's data.
  'users',
  'api_tokens',
]);

interface SweptTable {
  name: string;
  columns: { name: string; max: number | null }[];
  voterLink: boolean;
}

const catalogs = new WeakMap<object, Promise<SweptTable[]>>();

/**
 * Every table of the database with a `workspace_id` and text columns, read from the database's own catalog
 * (sqlite_master and table_info; information_schema on PostgreSQL): a table or column added by a later
 * migration is swept without this file knowing it.
 */
export function textTables(db: Kysely<Database>): Promise<SweptTable[]> {
  let found = catalogs.get(db);
  if (!found) catalogs.set(db, (found = readCatalog(db)));
  return found;
}

async function readCatalog(db: Kysely<Database>): Promise<SweptTable[]> {
  const columns = new Map<string, { name: string; type: string; max: number | null }[]>();
  if (isPostgres(db)) {
    const rows = await sql<{
      table_name: string;
      column_name: string;
      data_type: string;
      max: number | null;
    }>`
      SELECT c.table_name, c.column_name, c.data_type, c.character_maximum_length AS max
      FROM information_schema.columns c JOIN information_schema.tables t
        ON t.table_schema = c.table_schema AND t.table_name = c.table_name
      WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'`.execute(db);
    for (const row of rows.rows) {
      const list = columns.get(row.table_name) ?? [];
      list.push({
        name: row.column_name,
        type: row.data_type,
        max: row.max === null ? null : Number(row.max),
      });
      columns.set(row.table_name, list);
    }
  } else {
    const tables = await sql<{ name: string }>`
      SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL%'`.execute(db);
    for (const { name } of tables.rows) {
      const info = await sql<{
        name: string;
        type: string;
      }>`SELECT name, type FROM pragma_table_info(${name})`.execute(db);
      columns.set(
        name,
        info.rows.map((c) => ({ name: c.name, type: c.type, max: null })),
      );
    }
  }
  const swept: SweptTable[] = [];
  for (const [name, list] of columns) {
    if (UNSWEPT.has(name) || name.startsWith('voters_fts') || name.startsWith('kysely_')) continue;
    if (!list.some((c) => c.name === 'workspace_id')) continue;
    const text = list.filter((c) => isText(c.type));
    if (text.length === 0) continue;
    swept.push({
      name,
      columns: text.map((c) => ({ name: c.name, max: c.max })),
      voterLink: list.some((c) => c.name === 'voter_id'),
    });
  }
  return swept.sort((a, b) => a.name.localeCompare(b.name));
}

/** Text and JSON column types on either database (SQLite's declared types, PostgreSQL's data_type). */
export function isText(type: string): boolean {
  return /char|text|json|clob/i.test(type);
}

/** A phone's national number (`+919812345678` -> `9812345678`): free text often holds it so. */
function nationalNumber(phone: string): string | undefined {
  return parsePhoneNumberFromString(phone)?.nationalNumber;
}

export async function personOf(
  db: Executor,
  workspaceId: number,
  request: { address: string; voter_id: number | null },
): Promise<Person> {
  const voter =
    request.voter_id === null
      ? undefined
      : await db
          .selectFrom('voters')
          .selectAll()
          .where('workspace_id', '=', workspaceId)
          .where('id', '=', request.voter_id)
          .executeTakeFirst();
  const addresses = new Set<string>();
  if (!isErasedMark(request.address)) addresses.add(request.address);
  if (voter?.phone) addresses.add(voter.phone);
  if (voter?.email) addresses.add(voter.email);
  const strong = new Set<string>(addresses);
  for (const address of addresses) {
    const national = address.startsWith('+') ? nationalNumber(address) : undefined;
    if (national && national.length >= 6) strong.add(national);
  }
  if (voter?.epic_number) strong.add(voter.epic_number);
  // A name shorter than 3 characters is too common to find: it goes with the voter's row only.
  const weak = [voter?.name, voter?.name_local].filter((n): n is string => !!n && n.trim().length >= 3);
  return { voter, addresses: [...addresses], strong: [...strong], weak };
}

/** Tables outside the sweep whose planner statistics may sample a person's values (besides every swept one). */
const ANALYZED_TOO = ['voters', 'voter_search', 'voter_field_values', 'opt_outs'];

type Count = (key: string, n: bigint | number | undefined) => void;

/** The rows with one of the person's addresses in `column`, or of their voter (`voter_id`). */
function ofPerson(person: Person, column: 'address' | 'reporter_phone', addresses = person.addresses) {
  const found: RawBuilder<boolean>[] = [sql<boolean>`1 = 0`];
  if (addresses.length > 0) found.push(sql<boolean>`${sql.ref(column)} IN (${sql.join(addresses)})`);
  if (person.voter) found.push(sql<boolean>`voter_id = ${Number(person.voter.id)}`);
  return sql<boolean>`(${sql.join(found, sql` OR `)})`;
}

/**
 * Step 1 for the cases about the person: conversations lose their preview and the voter's name, grievances their
 * reporter, survey responses their voter and free-text answers (choices stay: results do not change).
 */
async function rewriteCases(trx: Executor, workspaceId: number, person: Person, count: Count) {
  const conversations = await trx
    .updateTable('conversations')
    .set({ last_message_preview: '', voter_name: null, voter_ward: null, voter_booth: null })
    .where('workspace_id', '=', workspaceId)
    .where(ofPerson(person, 'address'))
    .executeTakeFirst();
  count('conversations', conversations.numUpdatedRows);
  const phones = person.addresses.filter((a) => a.startsWith('+'));
  const grievances = await trx
    .updateTable('grievances')
    .set({ reporter_name: null, reporter_phone: null })
    .where('workspace_id', '=', workspaceId)
    .where(ofPerson(person, 'reporter_phone', phones))
    .executeTakeFirst();
  count('grievances', grievances.numUpdatedRows);
  const responses = await trx
    .selectFrom('survey_responses')
    .select('id')
    .where('workspace_id', '=', workspaceId)
    .where(ofPerson(person, 'address'))
    .execute();
  const ids = responses.map((r) => Number(r.id));
  count('survey_responses', ids.length);
  for (let i = 0; i < ids.length; i += 500) {
    const some = ids.slice(i, i + 500);
    await trx
      .updateTable('survey_answers')
      .set({ text_value: null, voter_id: null })
      .where('response_id', 'in', some)
      .execute();
    await trx.updateTable('survey_responses').set({ voter_id: null }).where('id', 'in', some).execute();
  }
}

/** Step 4: the voter row, and with it (cascades) their fields, tags, visits, marks and stamps. */
async function deleteVoter(trx: Executor, workspaceId: number, person: Person, count: Count) {
  if (!person.voter) return;
  const voterId = Number(person.voter.id);
  // A conversation's link to the voter has no foreign key to null it.
  await trx
    .updateTable('conversations')
    .set({ voter_id: null })
    .where('workspace_id', '=', workspaceId)
    .where('voter_id', '=', voterId)
    .execute();
  const voter = await trx
    .deleteFrom('voters')
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', voterId)
    .executeTakeFirst();
  count('voters', voter.numDeletedRows);
}

/**
 * Erasure (the contract's fourth part): removes a person's personal data from every table of the workspace and
 * keeps only a keyed hash of each address on an opt-out (so they are never messaged again), the counts, and an
 * audit entry naming the request, not the person.
 *
 * 1. Rows the person is the subject of are rewritten where they are found by address: messages (address and
 *    body), replies, conversations, grievances' reporter, survey answers' free text.
 * 2. A sweep of every text column of every table (textTables) replaces the person's addresses (by their keyed
 *    hash), national number and EPIC number wherever they stand, and their names in the rows that hold one of
 *    those or belong to their voter record (a name alone is not theirs: another voter may share it).
 * 3. Their opt-outs are replaced by one opt-out of every channel under the keyed hash of each address.
 * 4. The voter row goes, and with it (cascades) fields, tags, visits, poll-day marks and change stamps.
 * 5. Stored uploads and errors.csv files that hold them are deleted; an upload of an import still queued or
 *    running is listed in `remaining` (it is deleted when its job ends).
 */
export class Erasure {
  private readonly store: ImportFileStore;

  constructor(private readonly deps: { db: Db; appKey: Buffer }) {
    this.store = importFileStore(deps.db);
  }

  private get kysely() {
    return this.deps.db.kysely;
  }

  async erase(workspaceId: number, actor: AuditActor, ref: string) {
    const db = this.kysely;
    const request = await findRequest(db, workspaceId, ref);
    if (request.type !== 'erasure')
      throw new AppError(
        'conflict',
        `The request is of type ${request.type}: only an erasure request erases. Record an erasure request for the person.`,
      );
    if (request.status === 'rejected')
      throw new AppError('conflict', 'The request was rejected: a rejected request erases nothing.');
    // Erasing twice changes nothing: the first erasure's record is the answer.
    if (request.erasure) return requestView(request);
    const person = await personOf(db, workspaceId, {
      address: request.address,
      voter_id: request.voter_id === null ? null : Number(request.voter_id),
    });
    const files = await this.filesHolding(workspaceId, person);
    // Read before the transaction: on SQLite the transaction holds the one connection.
    const tables = await textTables(db);
    const record: ErasureRecord = { erased_at: nowIso(), removed: {}, remaining: files.remaining };
    const postgres = isPostgres(db);
    // SQLite: deleted rows' bytes are overwritten, not left in free pages (this connection, for the erasure).
    if (!postgres) await sql`PRAGMA secure_delete = ON`.execute(db);
    const erased = await db.transaction().execute(async (trx) => {
      record.removed = await this.rewrite(trx, workspaceId, person, tables);
      record.removed.import_files = files.removable.length;
      await recordAudit(trx, {
        workspaceId,
        actor,
        action: 'privacy.erased',
        target: { type: 'privacy_request', id: requestRef(Number(request.id)) },
        details: { removed: record.removed, remaining: record.remaining.length },
      });
      return trx
        .updateTable('privacy_requests')
        .set({
          status: 'completed',
          completed_at: record.erased_at,
          erasure: JSON.stringify(record),
          updated_at: record.erased_at,
        })
        .where('id', '=', request.id)
        .returningAll()
        .executeTakeFirstOrThrow();
    });
    if (!postgres) await sql`PRAGMA secure_delete = OFF`.execute(db);
    // PostgreSQL's planner statistics keep sample values (histogram bounds, most common values): taken again now,
    // from rows that no longer hold the person (ANALYZE reads a sample of 30,000 rows a table at most).
    else
      for (const table of [...tables.map((t) => t.name), ...ANALYZED_TOO])
        await sql`ANALYZE ${sql.table(table)}`.execute(db);
    for (const key of files.removable) await this.store.remove(key);
    return requestView(erased);
  }

  private mark(address: string): string {
    return erasedMark(this.deps.appKey, address);
  }

  /** Steps 1-4, in the caller's transaction; how many rows of each kind changed. */
  private async rewrite(
    trx: Executor,
    workspaceId: number,
    person: Person,
    tables: SweptTable[],
  ): Promise<Record<string, number>> {
    const removed: Record<string, number> = {};
    const count = (key: string, n: bigint | number | undefined) =>
      (removed[key] = (removed[key] ?? 0) + Number(n ?? 0));
    await this.rewriteMessages(trx, workspaceId, person, count);
    await rewriteCases(trx, workspaceId, person, count);
    count('rows_redacted', await this.sweep(trx, workspaceId, person, tables));
    await this.replaceOptOuts(trx, workspaceId, person, count);
    await deleteVoter(trx, workspaceId, person, count);
    return removed;
  }

  /** Step 1 for messages both ways: the address becomes its keyed hash, the body goes; status and cost stay. */
  private async rewriteMessages(trx: Executor, workspaceId: number, person: Person, count: Count) {
    for (const address of person.addresses) {
      const mark = this.mark(address);
      const messages = await trx
        .updateTable('messages')
        .set({ to: mark, body: '', subject: null, media_url: null, error: null })
        .where('workspace_id', '=', workspaceId)
        .where('to', '=', address)
        .executeTakeFirst();
      count('messages', messages.numUpdatedRows);
      const inbound = await trx
        .updateTable('inbound_messages')
        .set({ from: mark, body: '' })
        .where('workspace_id', '=', workspaceId)
        .where('from', '=', address)
        .executeTakeFirst();
      count('inbound_messages', inbound.numUpdatedRows);
    }
  }

  /** Step 3: the person's opt-outs become one opt-out of every channel under each address's keyed hash. */
  private async replaceOptOuts(trx: Executor, workspaceId: number, person: Person, count: Count) {
    for (const address of person.addresses) {
      const cleared = await trx
        .deleteFrom('opt_outs')
        .where('workspace_id', '=', workspaceId)
        .where('address', '=', address)
        .executeTakeFirst();
      count('opt_outs', cleared.numDeletedRows);
      await trx
        .insertInto('opt_outs')
        .values({
          workspace_id: workspaceId,
          address: this.mark(address),
          channel: 'all',
          source: 'erasure',
          reason: null,
          created_at: nowIso(),
        })
        .onConflict((oc) => oc.columns(['workspace_id', 'address', 'channel']).doNothing())
        .execute();
    }
  }

  /** Step 2: every text column of every table; returns how many rows changed. */
  private async sweep(
    trx: Executor,
    workspaceId: number,
    person: Person,
    tables: SweptTable[],
  ): Promise<number> {
    if (person.strong.length === 0 && person.voter === undefined) return 0;
    const postgres = isPostgres(trx);
    // Longest first, so that a phone's E.164 form is replaced before its national number inside it.
    const replacements: [string, string][] = [
      ...person.strong.map((s): [string, string] => [
        s,
        person.addresses.includes(s) ? this.mark(s) : ERASED,
      ]),
    ].sort((a, b) => b[0].length - a[0].length);
    const weak: [string, string][] = person.weak.map((w) => [w, ERASED]);
    const holds = (column: string, value: string) =>
      postgres
        ? sql<boolean>`strpos(${sql.ref(column)}, ${value}) > 0`
        : sql<boolean>`instr(${sql.ref(column)}, ${value}) > 0`;
    const replaced = (column: string, pairs: [string, string][], max: number | null): RawBuilder<string> => {
      let expression: RawBuilder<string> = sql<string>`${sql.ref(column)}`;
      for (const [from, to] of pairs) expression = sql<string>`replace(${expression}, ${from}, ${to})`;
      return max !== null ? sql<string>`left(${expression}, ${max})` : expression;
    };
    const voterId = person.voter ? Number(person.voter.id) : undefined;
    let changed = 0;
    for (const table of tables) {
      const found: RawBuilder<boolean>[] = [];
      for (const column of table.columns)
        for (const value of person.strong) found.push(holds(column.name, value));
      if (voterId !== undefined && table.voterLink) found.push(sql<boolean>`voter_id = ${voterId}`);
      if (voterId !== undefined && table.name === 'audit_log')
        found.push(sql<boolean>`(target_type = 'voter' AND target_id = ${String(voterId)})`);
      if (found.length === 0) continue;
      const sets = table.columns.map(
        (column) =>
          sql`${sql.ref(column.name)} = ${replaced(column.name, [...replacements, ...weak], column.max)}`,
      );
      const result = await sql`UPDATE ${sql.table(table.name)} SET ${sql.join(sets)}
        WHERE workspace_id = ${workspaceId} AND (${sql.join(found, sql` OR `)})`.execute(trx);
      changed += Number(result.numAffectedRows ?? 0);
    }
    return changed;
  }

  /**
   * Step 5, read before the transaction: the stored import files of the workspace that hold the person. A
   * finished job's files can go now; a queued or running job's upload stays until the job ends (its own code
   * deletes it then), and is listed.
   */
  private async filesHolding(workspaceId: number, person: Person) {
    const needles = [...person.strong, ...person.weak].map((s) => Buffer.from(s, 'utf8'));
    const removable: string[] = [];
    const remaining: ErasureRecord['remaining'] = [];
    if (needles.length === 0) return { removable, remaining };
    const jobs = await this.kysely
      .selectFrom('voter_imports')
      .select(['id', 'file_key', 'status'])
      .where('workspace_id', '=', workspaceId)
      .execute();
    for (const job of jobs) {
      const live = job.status === 'queued' || job.status === 'running';
      for (const key of [job.file_key, `${job.file_key}.errors`]) {
        if (!(await this.holds(key, needles))) continue;
        if (live && key === job.file_key)
          remaining.push({
            import_id: importJobRef(Number(job.id)),
            file: 'upload',
            removed_by: 'its import job, when it ends',
          });
        else removable.push(key);
      }
    }
    return { removable, remaining };
  }

  /** Whether a stored file holds any of `needles` (read a chunk at a time; a needle may cross two chunks). */
  private async holds(key: string, needles: Buffer[]): Promise<boolean> {
    const overlap = Math.max(...needles.map((n) => n.length));
    let tail = Buffer.alloc(0);
    try {
      for await (const chunk of this.store.read(key)) {
        const window = Buffer.concat([tail, chunk]);
        if (needles.some((n) => window.includes(n))) return true;
        tail = window.subarray(Math.max(0, window.length - overlap));
      }
    } catch {
      // No such file (an upload already removed, a job without errors): nothing to find.
    }
    return false;
  }
}
