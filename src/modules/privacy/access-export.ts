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
import { personOf } from './erasure.ts';
import { findRequest, requestRef, requestView } from './privacy.service.ts';

/** Rows of one kind an export holds at most (a person's messages over years stay far below it). */
const MAX_ROWS = 50_000;

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
  const voterId = person.voter ? Number(person.voter.id) : undefined;
  const addresses = person.addresses.length > 0 ? person.addresses : ['\u0000'];
  const ws = workspaceId;
  const files: [string, string][] = [];
  const add = (name: string, data: unknown) => files.push([name, `${JSON.stringify(data, null, 2)}\n`]);

  add('request.json', requestView(request));
  if (person.voter && voterId !== undefined) {
    const defs = await fieldDefs(db, ws);
    const [tags, fields] = await Promise.all([
      tagsOf(db, ws, [voterId]),
      fieldValuesOf(db, ws, [voterId], defs),
    ]);
    add('voter.json', {
      ...voterView(person.voter),
      tags: tags.get(voterId) ?? [],
      fields: fields.get(voterId) ?? {},
    });
  } else add('voter.json', null);

  const messages = await db
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
  add(
    'messages_sent.json',
    messages.map((m) => ({ ...m, id: messageRef(Number(m.id)) })),
  );
  const inbound = await db
    .selectFrom('inbound_messages')
    .select(['id', 'channel', 'from', 'body', 'keyword', 'created_at'])
    .where('workspace_id', '=', ws)
    .where('from', 'in', addresses)
    .orderBy('id')
    .limit(MAX_ROWS)
    .execute();
  add(
    'messages_received.json',
    inbound.map((m) => ({ ...m, id: inboundRef(Number(m.id)) })),
  );
  const conversations = await db
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
  add(
    'conversations.json',
    conversations.map((c) => ({ ...c, id: conversationRef(Number(c.id)) })),
  );
  const phones = addresses.filter((a) => a.startsWith('+'));
  add(
    'grievances.json',
    await db
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
      .execute(),
  );
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
  add(
    'survey_responses.json',
    responses.map((r) => ({
      ...r,
      id: responseRef(Number(r.id)),
      survey_id: surveyRef(Number(r.survey_id)),
      answers: answers
        .filter((a) => Number(a.response_id) === Number(r.id))
        .map(({ response_id: _, ...answer }) => answer),
    })),
  );
  if (voterId !== undefined) {
    const visits = await db
      .selectFrom('visits')
      .select(['id', 'outcome', 'support_level', 'tags_add', 'fields', 'note', 'visited_at', 'lat', 'lon'])
      .where('workspace_id', '=', ws)
      .where('voter_id', '=', voterId)
      .orderBy('id')
      .execute();
    add(
      'visits.json',
      visits.map((v) => ({ ...v, id: visitRef(Number(v.id)) })),
    );
    const marks = await db
      .selectFrom('poll_marks')
      .select(['id', 'voted', 'marked_at'])
      .where('workspace_id', '=', ws)
      .where('voter_id', '=', voterId)
      .orderBy('id')
      .execute();
    add(
      'poll_day_marks.json',
      marks.map((m) => ({ id: markRef(Number(m.id)), voted: m.voted === 1, marked_at: m.marked_at })),
    );
  } else {
    add('visits.json', []);
    add('poll_day_marks.json', []);
  }
  add(
    'opt_outs.json',
    await db
      .selectFrom('opt_outs')
      .select(['address', 'channel', 'source', 'reason', 'created_at'])
      .where('workspace_id', '=', ws)
      .where('address', 'in', addresses)
      .orderBy('id')
      .execute(),
  );
  const requests = await db
    .selectFrom('privacy_requests')
    .select('id')
    .where('workspace_id', '=', ws)
    .where('address', 'in', addresses)
    .execute();
  add(
    'audit.json',
    await db
      .selectFrom('audit_log')
      .select(['action', 'actor_name', 'target_type', 'target_id', 'details', 'created_at'])
      .where('workspace_id', '=', ws)
      .where((eb) =>
        eb.or([
          ...(voterId !== undefined
            ? [eb.and([eb('target_type', '=', 'voter'), eb('target_id', '=', String(voterId))])]
            : []),
          eb.and([
            eb('target_type', '=', 'privacy_request'),
            eb('target_id', 'in', [
              requestRef(Number(request.id)),
              ...requests.map((r) => requestRef(Number(r.id))),
            ]),
          ]),
        ]),
      )
      .orderBy('id')
      .limit(MAX_ROWS)
      .execute(),
  );
  await recordAudit(db, {
    workspaceId,
    actor,
    action: 'privacy.exported',
    target: { type: 'privacy_request', id: requestRef(Number(request.id)) },
    details: { files: files.map(([name]) => name) },
  });
  return { fileName: `privacy-${requestRef(Number(request.id))}.zip`, zip: zipOf(files) };
}
