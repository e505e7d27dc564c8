import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.ts';
import type { Download } from '../../http/download.ts';
import { csvField } from '../../lib/csv.ts';
import { type Cell, xlsxRun, xlsxStream } from '../../lib/xlsx.ts';
import { validationError } from '../../errors.ts';
import { type AuditActor, recordAudit } from '../audit/audit.repository.ts';
import { exportFormats, type ExportFormat } from '../voter-exports/export-format.ts';
import { checkVoterFilters, filteredVoters, withPlaces, type VoterFilters } from '../voters/voters.search.ts';
import { definitionOf, sensitiveQuestions } from './survey-sessions.ts';
import {
  answersOf,
  answerTallies,
  type GroupBy,
  groupColumns,
  responsesAfter,
  responseTotals,
} from './survey-responses.repository.ts';
import { voterBooths } from '../voters/voters.repository.ts';
import { type Question, textIn } from './surveys.rules.ts';
import type { SurveysService } from './surveys.service.ts';
import { parseRef, responseRef, runRef, surveyRef } from '../../refs.ts';

/** A survey's results (exact counts by question and choice, optionally by place) and its responses' export. */

interface Tally {
  answered: number;
  choices: Map<string, number>;
  sum: number;
  numbers: number;
}

const tally = (): Tally => ({ answered: 0, choices: new Map(), sum: 0, numbers: 0 });

function shown(type: string, t: Tally, keys: readonly string[]) {
  return {
    answered: t.answered,
    ...(type === 'choice'
      ? {
          choices: [...keys, ...(t.choices.has('other') && !keys.includes('other') ? ['other'] : [])].map(
            (key) => ({ key, count: t.choices.get(key) ?? 0 }),
          ),
        }
      : {}),
    ...(type === 'number'
      ? { mean: t.numbers > 0 ? Math.round((t.sum / t.numbers) * 1000) / 1000 : null }
      : {}),
  };
}

export class SurveyResults {
  constructor(private readonly deps: { db: Kysely<Database>; surveys: SurveysService }) {}

  private async voterFilter(
    workspaceId: number,
    raw: Record<string, unknown>,
  ): Promise<VoterFilters | undefined> {
    const rest = Object.fromEntries(
      Object.entries(raw).filter(
        ([k]) => !['group_by', 'page', 'per_page', 'format', 'run_id', 'status'].includes(k),
      ),
    );
    if (Object.keys(rest).length === 0) return undefined;
    return withPlaces(this.deps.db, workspaceId, await checkVoterFilters(this.deps.db, workspaceId, rest));
  }

  /**
   * `{ responses, completed, questions: [{ key, type, answered, choices?, mean?, groups? }] }`: GROUP BYs over
   * survey_answers' (survey, question, choice) index, joined to voters only for a group or a voter filter.
   */
  async results(workspaceId: number, ref: string, raw: Record<string, unknown>) {
    const { db } = this.deps;
    const survey = await this.deps.surveys.find(db, workspaceId, ref);
    const groupBy = raw.group_by as GroupBy | undefined;
    if (groupBy !== undefined && !(groupBy in groupColumns))
      throw validationError({ group_by: [`must be one of ${Object.keys(groupColumns).join(', ')}.`] });
    const filters = await this.voterFilter(workspaceId, raw);
    const inFilter = filters ? filteredVoters(db, workspaceId, filters).select('voters.id') : undefined;

    const rows = await answerTallies(db, survey, groupBy, inFilter);
    const counts = await responseTotals(db, workspaceId, survey.id, inFilter);

    const def = definitionOf(survey);
    const totals = new Map<string, Tally>();
    const groups = new Map<string, Map<string, Tally>>();
    for (const r of rows) {
      const n = Number(r.n);
      for (const t of [
        totals.get(r.question_key) ?? totals.set(r.question_key, tally()).get(r.question_key)!,
        ...(groupBy
          ? [
              (() => {
                const byGroup =
                  groups.get(r.question_key) ?? groups.set(r.question_key, new Map()).get(r.question_key)!;
                const g = r.g === null ? '' : String(r.g);
                return byGroup.get(g) ?? byGroup.set(g, tally()).get(g)!;
              })(),
            ]
          : []),
      ]) {
        t.answered += n;
        if (r.choice_key !== null) t.choices.set(r.choice_key, (t.choices.get(r.choice_key) ?? 0) + n);
        t.sum += Number(r.s ?? 0);
        t.numbers += Number(r.nn);
      }
    }
    return {
      ...counts,
      ...(groupBy ? { group_by: groupBy } : {}),
      questions: def.questions.map((q) => {
        const keys = (q.choices ?? []).map((c) => c.key);
        return {
          key: q.key,
          type: q.type,
          ...shown(q.type, totals.get(q.key) ?? tally(), keys),
          ...(groupBy
            ? {
                groups: [...(groups.get(q.key) ?? new Map<string, Tally>())]
                  .sort(([a], [b]) => a.localeCompare(b, 'en', { numeric: true }))
                  .map(([group, t]) => ({ group: group === '' ? null : group, ...shown(q.type, t, keys) })),
              }
            : {}),
        };
      }),
    };
  }

  /** The responses as CSV or Excel, streamed a thousand at a time (cells formula-guarded). */
  async export(
    workspaceId: number,
    actor: AuditActor,
    ref: string,
    format: ExportFormat,
    runRefText?: string,
    /** The answers that save to support_level or a sensitive field (politicians: the route checks). */
    includeSensitive = false,
  ): Promise<Download> {
    const { db } = this.deps;
    const survey = await this.deps.surveys.find(db, workspaceId, ref);
    const def = definitionOf(survey);
    const hidden = includeSensitive
      ? new Set<string>()
      : await sensitiveQuestions(db, workspaceId, def.questions);
    const questions = def.questions.filter((q) => !hidden.has(q.key));
    const runId = runRefText !== undefined ? parseRef('srun', runRefText) : undefined;
    if (runRefText !== undefined && runId === undefined)
      throw validationError({ run_id: ['must be a run id such as srun_3.'] });
    await recordAudit(db, {
      workspaceId,
      actor,
      action: includeSensitive ? 'survey.exported_sensitive' : 'survey.updated',
      target: { type: 'survey', id: surveyRef(survey.id) },
      details: { exported: format, ...(includeSensitive ? { include_sensitive: true } : {}) },
    });
    const columns = [...RESPONSE_COLUMNS, ...questions.map((q) => q.key)];
    const rows = this.responseRows(workspaceId, survey.id, runId, questions);
    const { contentType, extension } = exportFormats[format];
    return {
      contentType,
      filename: `survey-${survey.id}-responses.${extension}`,
      body: fileOf(format, columns, rows),
    };
  }

  /** The responses, a thousand at a time, as the export's rows: a choice as the voter was asked it. */
  private async *responseRows(
    workspaceId: number,
    surveyId: number,
    runId: number | undefined,
    questions: Question[],
  ): AsyncGenerator<Cell[][]> {
    const { db } = this.deps;
    let after = 0;
    for (;;) {
      const rows = await responsesAfter(db, workspaceId, surveyId, after, runId, 1000);
      if (rows.length === 0) return;
      after = rows[rows.length - 1]!.id;
      const answers = await answersOf(
        db,
        workspaceId,
        rows.map((r) => r.id),
      );
      // The voters' booths as they are now (results by booth count the answers where the voter was).
      const voterIds = [...new Set(rows.flatMap((r) => (r.voter_id !== null ? [r.voter_id] : [])))];
      const booths = await voterBooths(db, workspaceId, voterIds);
      yield rows.map((r) => {
        const a = answers.get(r.id) ?? {};
        return [
          responseRef(r.id),
          r.run_id !== null ? runRef(r.run_id) : null,
          r.voter_id,
          r.address,
          r.channel,
          r.language,
          r.status,
          r.voter_id !== null ? (booths.get(Number(r.voter_id)) ?? null) : null,
          r.started_at,
          r.completed_at,
          // A choice as the voter was asked it (its label in their language), not its key.
          ...questions.map((q) => {
            const value = a[q.key] ?? null;
            const choice = q.choices?.find((c) => c.key === value);
            return choice ? textIn(choice.label, r.language) : value;
          }),
        ];
      });
    }
  }
}

/** The export's columns before one per question. */
const RESPONSE_COLUMNS = [
  'id',
  'run_id',
  'voter_id',
  'address',
  'channel',
  'language',
  'status',
  'booth',
  'started_at',
  'completed_at',
];

/** `rows` under `columns` as a CSV or Excel file, streamed. */
function fileOf(format: ExportFormat, columns: string[], rows: AsyncGenerator<Cell[][]>): Download['body'] {
  if (format === 'excel') {
    const runs = async function* () {
      for await (const batch of rows) yield xlsxRun(batch);
    };
    return xlsxStream(columns, runs());
  }
  return (async function* (): AsyncGenerator<Buffer> {
    yield Buffer.from(columns.join(',') + '\n', 'utf8');
    for await (const batch of rows)
      yield Buffer.from(
        batch.map((cells) => cells.map((c) => csvField(c)).join(',') + '\n').join(''),
        'utf8',
      );
  })();
}
