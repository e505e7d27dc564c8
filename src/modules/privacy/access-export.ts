import { type Kysely, sql } from 'kysely';
import type { Database } from '../../db/schema.ts';
import { AppError } from '../../errors.ts';
import { zipOf } from '../../lib/xlsx.ts';
import {
  conversationRef,
  inboundRef,
  markRef,
  messageRef,
  responseRef,
  surveyRef,
  visitRef,
} from '../../refs.ts';
import { type AuditActor, recordAudit } from '../audit/audit.repository.ts';
import { fieldDefs } from '../voters/voter-fields.ts';
import { fieldValuesOf, tagsOf } from '../voters/voter-record.repository.ts';
import { voterView } from '../voters/voters.service.ts';
import { type Person, personOf } from './erasure.ts';
import { findRequest, requestRef, requestView } from './privacy.service.ts';

/** Rows of one kind an export holds at most (a person's messages over years stay far below it). */
const MAX_ROWS = 50_000;

/** Who the export is of: the workspace, the person's voter (if any) and addresses (never an empty list). */
interface Subject {
  db: Kysely<Database>;
  ws: number;
  person: Person;
  voterId: number | undefined;
  addresses: string[];
}

/**
 * The access export (the contract's fourth part): everything the workspace keeps about the person a request
 * names, as a ZIP of JSON files, audited as `privacy.exported`. Sensitive fields and the support level are in it:
 * they are the person's own data, and only a politician exports.
 */
export async function accessExport(
  db: Kysely<Database>,
  workspaceId: number,
  actor: AuditActor,
  ref: string,
): Promise<{ fileName: string; zip: Buffer }> {
  const request = await findRequest(db, workspaceId, ref);
  if (request.erasure)
    throw new AppError('conflict', 'The person was erased: the workspace keeps nothing of them to export.');
  const person = await personOf(db, workspaceId, {
    address: request.address,
    voter_id: request.voter_id === null ? null : Number(request.voter_id),
  });
  const subject: Subject = {
    db,
    ws: workspaceId,
    person,
    voterId: person.voter ? Number(person.voter.id) : undefined,
    // No address: a value no row holds, so that `IN (...)` stays valid and finds nothing.
    addresses: person.addresses.length > 0 ? person.addresses : ['\u0000'],
  };
  const parts: Record<string, unknown> = {
    'request.json': requestView(request),
    'voter.json': await voterOf(subject),
    ...(await messagesOf(subject)),
    'conversations.json': await conversationsOf(subject),
    'grievances.json': await grievancesOf(subject),
    'survey_responses.json': await responsesOf(subject),
    ...(await fieldWorkOf(subject)),
    'opt_outs.json': await optOutsOf(subject),
    'audit.json': await auditOf(subject, Number(request.id)),
  };
  const files = Object.entries(parts).map(([name, data]): [string, string] => [
    name,
    `${JSON.stringify(data, null, 2)}\n`,
  ]);
  await recordAudit(db, {
    workspaceId,
    actor,
    action: 'privacy.exported',
    target: { type: 'privacy_request', id: requestRef(Number(request.id)) },
    details: { files: files.map(([name]) => name) },
  });
  return { fileName: `privacy-${requestRef(Number(request.id))}.zip`, zip: zipOf(files) };
}

/** The voter record with its tags and every custom field (sensitive ones too), or null. */
async function voterOf({ db, ws, person, voterId }: Subject) {
  if (!person.voter || voterId === undefined) return null;
  const defs = await fieldDefs(db, ws);
  const [tags, fields] = await Promise.all([
    tagsOf(db, ws, [voterId]),
    fieldValuesOf(db, ws, [voterId], defs),
  ]);
  return { ...voterView(person.voter), tags: tags.get(voterId) ?? [], fields: fields.get(voterId) ?? {} };
}

/** Messages to the person and replies from them. */
async function messagesOf({ db, ws, addresses }: Subject) {
  const sent = await db
    .selectFrom('messages')
    .select([
      'id',
      'channel',
      'to',
      'body',
      'subject',
      'status',
      'error_code',
      'created_at',
      'sent_at',
      'delivered_at',
    ])
    .where('workspace_id', '=', ws)
    .where('to', 'in', addresses)
    .orderBy('id')
    .limit(MAX_ROWS)
    .execute();
  const received = await db
    .selectFrom('inbound_messages')
    .select(['id', 'channel', 'from', 'body', 'keyword', 'created_at'])
    .where('workspace_id', '=', ws)
    .where('from', 'in', addresses)
    .orderBy('id')
    .limit(MAX_ROWS)
    .execute();
  return {
    'messages_sent.json': sent.map((m) => ({ ...m, id: messageRef(Number(m.id)) })),
    'messages_received.json': received.map((m) => ({ ...m, id: inboundRef(Number(m.id)) })),
  };
}

async function conversationsOf({ db, ws, addresses, voterId }: Subject) {
  const rows = await db
    .selectFrom('conversations')
    .select(['id', 'channel', 'address', 'status', 'created_at', 'last_message_at'])
    .where('workspace_id', '=', ws)
    .where((eb) =>
      eb.or([
        eb('address', 'in', addresses),
        ...(voterId !== undefined ? [eb('voter_id', '=', voterId)] : []),
      ]),
    )
    .orderBy('id')
    .execute();
  return rows.map((c) => ({ ...c, id: conversationRef(Number(c.id)) }));
}

/** Grievances about their voter record or reported from their phone. */
async function grievancesOf({ db, ws, addresses, voterId }: Subject) {
  const phones = addresses.filter((a) => a.startsWith('+'));
  return db
    .selectFrom('grievances')
    .select([
      'id',
      'title',
      'description',
      'category',
      'status',
      'reporter_name',
      'reporter_phone',
      'created_at',
      'resolved_at',
    ])
    .where('workspace_id', '=', ws)
    .where((eb) =>
      eb.or([
        ...(phones.length > 0 ? [eb('reporter_phone', 'in', phones)] : []),
        ...(voterId !== undefined ? [eb('voter_id', '=', voterId)] : []),
        sql<boolean>`1 = 0`,
      ]),
    )
    .orderBy('id')
    .execute();
}

/** Survey responses with their answers. */
async function responsesOf({ db, ws, addresses, voterId }: Subject) {
  const responses = await db
    .selectFrom('survey_responses')
    .select(['id', 'survey_id', 'channel', 'address', 'status', 'started_at', 'completed_at'])
    .where('workspace_id', '=', ws)
    .where((eb) =>
      eb.or([
        eb('address', 'in', addresses),
        ...(voterId !== undefined ? [eb('voter_id', '=', voterId)] : []),
      ]),
    )
    .orderBy('id')
    .execute();
  const answers =
    responses.length === 0
      ? []
      : await db
          .selectFrom('survey_answers')
          .select(['response_id', 'question_key', 'choice_key', 'number_value', 'text_value', 'answered_at'])
          .where(
            'response_id',
            'in',
            responses.map((r) => r.id),
          )
          .execute();
  return responses.map((r) => ({
    ...r,
    id: responseRef(Number(r.id)),
    survey_id: surveyRef(Number(r.survey_id)),
    answers: answers
      .filter((a) => Number(a.response_id) === Number(r.id))
      .map(({ response_id: _, ...answer }) => answer),
  }));
}

/** Door visits and poll-day marks of their voter record. */
async function fieldWorkOf({ db, ws, voterId }: Subject) {
  if (voterId === undefined) return { 'visits.json': [], 'poll_day_marks.json': [] };
  const visits = await db
    .selectFrom('visits')
    .select(['id', 'outcome', 'support_level', 'tags_add', 'fields', 'note', 'visited_at', 'lat', 'lon'])
    .where('workspace_id', '=', ws)
    .where('voter_id', '=', voterId)
    .orderBy('id')
    .execute();
  const marks = await db
    .selectFrom('poll_marks')
    .select(['id', 'voted', 'marked_at'])
    .where('workspace_id', '=', ws)
    .where('voter_id', '=', voterId)
    .orderBy('id')
    .execute();
  return {
    'visits.json': visits.map((v) => ({ ...v, id: visitRef(Number(v.id)) })),
    'poll_day_marks.json': marks.map((m) => ({
      id: markRef(Number(m.id)),
      voted: m.voted === 1,
      marked_at: m.marked_at,
    })),
  };
}

async function optOutsOf({ db, ws, addresses }: Subject) {
  return db
    .selectFrom('opt_outs')
    .select(['address', 'channel', 'source', 'reason', 'created_at'])
    .where('workspace_id', '=', ws)
    .where('address', 'in', addresses)
    .orderBy('id')
    .execute();
}

/** The audit entries about their voter record and about their requests. */
async function auditOf({ db, ws, addresses, voterId }: Subject, requestId: number) {
  const requests = await db
    .selectFrom('privacy_requests')
    .select('id')
    .where('workspace_id', '=', ws)
    .where('address', 'in', addresses)
    .execute();
  const refs = [requestRef(requestId), ...requests.map((r) => requestRef(Number(r.id)))];
  return db
    .selectFrom('audit_log')
    .select(['action', 'actor_name', 'target_type', 'target_id', 'details', 'created_at'])
    .where('workspace_id', '=', ws)
    .where((eb) =>
      eb.or([
        ...(voterId !== undefined
          ? [eb.and([eb('target_type', '=', 'voter'), eb('target_id', '=', String(voterId))])]
          : []),
        eb.and([eb('target_type', '=', 'privacy_request'), eb('target_id', 'in', refs)]),
      ]),
    )
    .orderBy('id')
    .limit(MAX_ROWS)
    .execute();
}
