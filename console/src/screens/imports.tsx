import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useRef, useState } from 'react';
import { api, data, download, uploadFile } from '../api.ts';
import { useI18n } from '../i18n.tsx';
import { Badge, Empty, ErrorNote, Field, Loading, Notice, Section, Table } from '../ui.tsx';
import { UnknownPlaces } from './places.tsx';
import { FilterForm, noFilters, setFilters } from './voters.tsx';

interface DryRun {
  imported: number;
  updated: number;
  failed: number;
  errors: Array<{ row: number; field: string; message: string }>;
  unknown_places: Partial<Record<'constituency' | 'ward' | 'booth', string[]>>;
}

/** Upload a roll (a dry run first, if wished), watch its job, download its failed rows; export the roll. */
export function Imports() {
  const { t, n, d } = useI18n();
  const client = useQueryClient();
  const file = useRef<HTMLInputElement>(null);
  const [dryRun, setDryRun] = useState(false);
  const [checked, setChecked] = useState<DryRun | null>(null);
  const [selected, setSelected] = useState<string | null>(null);
  const upload = useMutation({
    mutationFn: async () => {
      const chosen = file.current?.files?.[0];
      if (!chosen) throw new Error(t('import.chooseFile'));
      return uploadFile<DryRun & { id?: string }>(
        `/api/voters/import${dryRun ? '?dry_run=true' : ''}`,
        chosen,
        dryRun ? {} : { prefer: 'respond-async' },
      );
    },
    onSuccess: (result) => {
      if (dryRun) setChecked(result);
      else {
        setChecked(null);
        if (result.id) setSelected(result.id);
        void client.invalidateQueries({ queryKey: ['imports'] });
      }
    },
  });
  const jobs = useQuery({
    queryKey: ['imports'],
    queryFn: () => data(api.GET('/api/voters/imports', { params: { query: { per_page: 10 } } })),
    refetchInterval: (q) =>
      q.state.data?.data.some((j) => j.status === 'queued' || j.status === 'running') ? 1_000 : false,
  });
  const job = jobs.data?.data.find((j) => j.id === selected) ?? jobs.data?.data[0];
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
    <>
      <h1>{t('nav.imports')}</h1>
      <Section title={t('import.title')}>
        <p className="muted">{t('import.help')}</p>
        <form
          onSubmit={(e) => {
            e.preventDefault();
            upload.mutate();
          }}
        >
          <Field label={t('import.file')}>
            <input ref={file} type="file" accept=".csv,text/csv" required />
          </Field>
          <label className="check">
            <input type="checkbox" checked={dryRun} onChange={(e) => setDryRun(e.target.checked)} />
            {t('import.dryRun')}
          </label>
          <ErrorNote error={upload.error} />
          <button className="primary" disabled={upload.isPending}>
            {dryRun ? t('import.check') : t('import.upload')}
          </button>
        </form>
        {checked && (
          <>
            <Notice>
              {t('import.dryResult', {
                created: n(checked.imported),
                updated: n(checked.updated),
                failed: n(checked.failed),
              })}
            </Notice>
            <RowErrors errors={checked.errors} />
            <UnknownPlaces unknown={checked.unknown_places} />
          </>
        )}
      </Section>
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
            <Table
              caption={t('import.jobs')}
              head={[t('import.file'), t('field.status'), t('field.created')]}
            >
              {jobs.data?.data.map((j) => (
                <tr key={j.id}>
                  <td>
                    <button type="button" className="link" onClick={() => setSelected(j.id)}>
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
    </>
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
