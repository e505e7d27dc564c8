import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useRef, useState } from 'react';
import { download, uploadFile } from '../api.ts';
import { useI18n } from '../i18n.tsx';
import { Badge, Empty, ErrorNote, Field, Loading, Notice, Section, Table } from '../ui.tsx';
import { UnknownPlaces } from './places.tsx';
import { FilterForm, noFilters, setFilters } from './voters.tsx';
import { useVoterFields } from './voter-shared.ts';
import { keys, queries } from '../queries.ts';

interface DryRun {
  imported: number;
  updated: number;
  failed: number;
  errors: Array<{ row: number; field: string; message: string }>;
  warnings: Array<{ line: number; field: string; value: string; reason: string }>;
  ignored_columns: string[];
  unknown_places: Partial<Record<'constituency' | 'ward' | 'booth', string[]>>;
}

/** A heading as the service compares it: lower case, single spaces, no dots (voter-imports.ts headerName). */
const headingKey = (name: string) =>
  name
    .normalize('NFC')
    .trim()
    .toLowerCase()
    .replace(/\./g, '')
    .replace(/[\s_]+/g, ' ')
    .trim();

/** The first records of a CSV text (quotes with "" inside, commas and line breaks in them). */
function firstRecords(text: string, count: number): string[][] {
  const records: string[][] = [];
  let record: string[] = [];
  let cell = '';
  let quoted = false;
  for (let i = 0; i < text.length && records.length < count; i++) {
    const c = text[i]!;
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        cell += '"';
        i++;
      } else if (c === '"') quoted = false;
      else cell += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') {
      record.push(cell);
      cell = '';
    } else if (c === '\n' || c === '\r') {
      if (c === '\r' && text[i + 1] === '\n') i++;
      record.push(cell);
      records.push(record);
      record = [];
      cell = '';
    } else cell += c;
  }
  if (records.length < count && (cell !== '' || record.length > 0)) records.push([...record, cell]);
  return records;
}

interface Column {
  heading: string;
  sample: string;
  field: string;
}

/** Upload a roll (a dry run first, if wished), watch its job, download its failed rows; export the roll. */
export function Imports() {
  const { t } = useI18n();
  /** The job the page shows (the newest, until another is chosen or uploaded). */
  const [selected, setSelected] = useState<string | null>(null);
  return (
    <>
      <h1>{t('nav.imports')}</h1>
      <ImportForm onJob={setSelected} />
      <ImportJobs selected={selected} onSelect={setSelected} />
      <ExportForm />
    </>
  );
}

type Known = NonNullable<ReturnType<typeof useImportColumns>['data']>;

function useImportColumns() {
  return useQuery(queries.importColumns());
}

/**
 * The file's headings, each with a sample and the field it will fill (the mapping step): the workspace's last
 * mapping, then the headings the import knows, then a fallback not yet taken; else ignored.
 */
function mappingOf(text: string, known: Known): Column[] {
  const [header = [], sample = []] = firstRecords(text, 2);
  const { headings, fallbacks, last_mapping: last, fields } = known;
  const taken = new Set<string>();
  const picked = header.map((heading) => {
    const key = headingKey(heading);
    const custom = /^field ?: ?(.+)$/.exec(key);
    const field =
      last?.[key] ??
      headings[key] ??
      (custom && fields.includes(`field:${custom[1]!.replace(/ /g, '_')}`)
        ? `field:${custom[1]!.replace(/ /g, '_')}`
        : undefined);
    if (field && field !== 'ignore') taken.add(field);
    return { heading, key, field };
  });
  return picked.map(({ heading, key, field }, i) => {
    const fallback = fallbacks[key];
    const chosenField = field ?? (fallback && !taken.has(fallback) ? fallback : 'ignore');
    if (chosenField !== 'ignore') taken.add(chosenField);
    return { heading, sample: sample[i] ?? '', field: chosenField };
  });
}

/** A file, its mapping, a dry run or the upload (a background job). */
function ImportForm({ onJob }: { onJob: (id: string) => void }) {
  const { t } = useI18n();
  const client = useQueryClient();
  const file = useRef<HTMLInputElement>(null);
  const [dryRun, setDryRun] = useState(false);
  const [checked, setChecked] = useState<DryRun | null>(null);
  const [columns, setColumns] = useState<Column[] | null>(null);
  const known = useImportColumns();
  const readHeadings = async () => {
    const chosen = file.current?.files?.[0];
    setChecked(null);
    if (!chosen || !known.data) return setColumns(null);
    const text = (await chosen.slice(0, 65_536).text()).replace(/^\ufeff/, '');
    setColumns(mappingOf(text, known.data));
  };
  const upload = useMutation({
    mutationFn: async () => {
      const chosen = file.current?.files?.[0];
      if (!chosen) throw new Error(t('import.chooseFile'));
      const mapping = columns ? Object.fromEntries(columns.map((c) => [c.heading, c.field])) : undefined;
      return uploadFile<DryRun & { id?: string }>(
        `/api/voters/import${dryRun ? '?dry_run=true' : ''}`,
        chosen,
        dryRun ? {} : { prefer: 'respond-async' },
        mapping ? { mapping: JSON.stringify(mapping) } : {},
      );
    },
    onSuccess: (result) => {
      // The mapping sent is the workspace's last now.
      void client.invalidateQueries({ queryKey: keys.importColumns });
      if (dryRun) setChecked(result);
      else {
        setChecked(null);
        // The upload is a job now: the form is ready for the next file.
        setColumns(null);
        if (file.current) file.current.value = '';
        if (result.id) onJob(result.id);
        void client.invalidateQueries({ queryKey: keys.imports });
      }
    },
  });
  return (
    <Section title={t('import.title')}>
      <p className="muted">{t('import.help')}</p>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          upload.mutate();
        }}
      >
        <Field label={t('import.file')}>
          <input
            ref={file}
            type="file"
            accept=".csv,text/csv"
            required
            onChange={() => void readHeadings()}
          />
        </Field>
        {columns && columns.length > 0 && (
          <MappingStep
            columns={columns}
            fields={known.data?.fields ?? []}
            onChange={(i, field) => setColumns(columns.map((c, j) => (j === i ? { ...c, field } : c)))}
          />
        )}
        <label className="check">
          <input type="checkbox" checked={dryRun} onChange={(e) => setDryRun(e.target.checked)} />
          {t('import.dryRun')}
        </label>
        <ErrorNote error={upload.error} />
        <button className="primary" disabled={upload.isPending}>
          {dryRun ? t('import.check') : t('import.upload')}
        </button>
      </form>
      {checked && <DryRunResult checked={checked} />}
    </Section>
  );
}

/** What a dry run found: the counts, the refused rows, the cells left out, ignored columns, unknown places. */
function DryRunResult({ checked }: { checked: DryRun }) {
  const { t, n } = useI18n();
  return (
    <>
      <Notice>
        {t('import.dryResult', {
          created: n(checked.imported),
          updated: n(checked.updated),
          failed: n(checked.failed),
        })}{' '}
        {checked.warnings.length > 0 &&
          t('import.warned', { count: checked.warnings.length, cells: n(checked.warnings.length) })}
      </Notice>
      <RowErrors errors={checked.errors} />
      <RowWarnings warnings={checked.warnings} />
      <Ignored columns={checked.ignored_columns} />
      <UnknownPlaces unknown={checked.unknown_places} />
    </>
  );
}

/** The import jobs: the chosen one (the newest by default) in full, and the list. */
function ImportJobs({ selected, onSelect }: { selected: string | null; onSelect: (id: string) => void }) {
  const { t, n, d } = useI18n();
  const jobs = useQuery({
    ...queries.imports(),
    refetchInterval: (q) =>
      q.state.data?.data.some((j) => j.status === 'queued' || j.status === 'running') ? 1_000 : false,
  });
  const job = jobs.data?.data.find((j) => j.id === selected) ?? jobs.data?.data[0];
  return (
    <Section title={t('import.jobs')}>
      <ErrorNote error={jobs.error} />
      {jobs.isPending ? (
        <Loading />
      ) : !job ? (
        <Empty>{t('none')}</Empty>
      ) : (
        <>
          <div className="job" data-testid="import-job">
            <p>
              <strong>{job.file_name}</strong> <Badge value={job.status} />
            </p>
            <progress
              max={Math.max(1, job.bytes)}
              value={job.status === 'completed' ? job.bytes : job.progress.bytes_read}
              aria-label={t('import.progress')}
            />
            <p>
              {t('import.counts', {
                created: n(job.imported),
                updated: n(job.updated),
                failed: n(job.failed),
              })}
            </p>
            {job.message && <p>{job.message}</p>}
            <RowErrors errors={job.errors} />
            <RowWarnings warnings={job.warnings} />
            {job.status === 'completed' && <Ignored columns={job.ignored_columns} />}
            {job.status === 'completed' && <UnknownPlaces key={job.id} unknown={job.unknown_places} />}
            {job.status === 'completed' && job.failed > 0 && (
              <button
                type="button"
                onClick={() => void download(`/api/voters/imports/${job.id}/errors.csv`, 'errors.csv')}
              >
                {t('import.downloadErrors')}
              </button>
            )}
          </div>
          <Table caption={t('import.jobs')} head={[t('import.file'), t('field.status'), t('field.created')]}>
            {jobs.data?.data.map((j) => (
              <tr key={j.id}>
                <td>
                  <button type="button" className="link" onClick={() => onSelect(j.id)}>
                    {j.file_name}
                  </button>
                </td>
                <td>
                  <Badge value={j.status} />
                </td>
                <td>{d(j.created_at)}</td>
              </tr>
            ))}
          </Table>
        </>
      )}
    </Section>
  );
}

/** The voters (all, or those of a filter) as CSV or Excel. */
function ExportForm() {
  const { t } = useI18n();
  const [exportFilters, setExportFilters] = useState(noFilters);
  const [format, setFormat] = useState<'csv' | 'excel'>('csv');
  const exporting = useMutation({
    mutationFn: () => {
      const query = new URLSearchParams({ format });
      const f = setFilters(exportFilters);
      if (Object.keys(f).length > 0) query.set('filters', JSON.stringify(f));
      return download(`/api/voters/export?${query}`, format === 'csv' ? 'voters.csv' : 'voters.xlsx');
    },
  });
  return (
    <Section title={t('export.title')}>
      <FilterForm value={exportFilters} onApply={setExportFilters} live />
      <Field label={t('export.format')}>
        <select value={format} onChange={(e) => setFormat(e.target.value as 'csv' | 'excel')}>
          <option value="csv">CSV</option>
          <option value="excel">Excel (.xlsx)</option>
        </select>
      </Field>
      <ErrorNote error={exporting.error} />
      <button
        type="button"
        className="primary"
        disabled={exporting.isPending}
        onClick={() => exporting.mutate()}
      >
        {t('export.download')}
      </button>
    </Section>
  );
}

/** The rows a file's import refused (or a dry run would), each with its field and what to fix. */
function RowErrors({ errors }: { errors: DryRun['errors'] }) {
  const { t, n } = useI18n();
  if (errors.length === 0) return null;
  return (
    <Table caption={t('import.errors')} head={[t('import.row'), t('import.field'), t('field.message')]}>
      {errors.map((e, i) => (
        <tr key={i}>
          <td>{n(e.row)}</td>
          <td>{e.field}</td>
          <td>{e.message}</td>
        </tr>
      ))}
    </Table>
  );
}

/**
 * The mapping step: each heading of the file, a sample value, and the field it will fill (filled from the
 * headings the service knows and the workspace's last mapping; the office changes any).
 */
function MappingStep(props: {
  columns: Column[];
  fields: readonly string[];
  onChange: (index: number, field: string) => void;
}) {
  const { t } = useI18n();
  const head = [t('import.heading'), t('import.sample'), t('import.fills')];
  const label = useFieldLabel();
  return (
    <>
      <h3>{t('import.mapping')}</h3>
      <p className="muted">{t('import.mapping.help')}</p>
      <Table caption={t('import.mapping')} head={head} stacked>
        {props.columns.map((c, i) => (
          <tr key={i}>
            <td data-label={head[0]}>{c.heading}</td>
            <td data-label={head[1]}>{c.sample}</td>
            <td data-label={head[2]}>
              <select
                aria-label={t('import.fillsFor', { heading: c.heading })}
                value={c.field}
                onChange={(e) => props.onChange(i, e.target.value)}
              >
                <option value="ignore">{t('import.ignore')}</option>
                {props.fields.map((f) => (
                  <option key={f} value={f}>
                    {label(f)}
                  </option>
                ))}
              </select>
            </td>
          </tr>
        ))}
      </Table>
    </>
  );
}

/**
 * A field as the office reads it: the record's by its name in the console's language, a custom field
 * (`field:<key>` in a mapping, `fields.<key>` in a warning) by its label.
 */
function useFieldLabel(): (field: string) => string {
  const { t } = useI18n();
  const defs = useVoterFields();
  return (field) => {
    const custom = /^fields?[:.](.+)$/.exec(field)?.[1];
    if (custom !== undefined) return defs.data?.find((d) => d.key === custom)?.label ?? custom;
    return t(`field.${field}` as 'field.name') || field;
  };
}

/** The cells an import left out of the rows it kept, each with why. */
function RowWarnings({ warnings }: { warnings: DryRun['warnings'] }) {
  const { t, n } = useI18n();
  const label = useFieldLabel();
  if (warnings.length === 0) return null;
  const head = [t('import.row'), t('import.field'), t('import.value'), t('import.reason')];
  return (
    <Table caption={t('import.warnings')} head={head} stacked>
      {warnings.map((w, i) => (
        <tr key={i}>
          <td data-label={head[0]}>{n(w.line)}</td>
          <td data-label={head[1]}>{label(w.field)}</td>
          <td data-label={head[2]}>{w.value}</td>
          <td data-label={head[3]}>{w.reason}</td>
        </tr>
      ))}
    </Table>
  );
}

/** The columns no field took. */
function Ignored({ columns }: { columns: string[] }) {
  const { t } = useI18n();
  if (columns.length === 0) return null;
  return <Notice>{t('import.ignored', { columns: columns.join(', ') })}</Notice>;
}
