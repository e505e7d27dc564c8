import { cloneElement, type ReactElement, type ReactNode, useId } from 'react';
import { ApiError } from './api.ts';
import { useI18n } from './i18n.tsx';
import type { Key } from './strings.ts';

/** The API's message for a failed call (as the API wrote it), or nothing. */
export function ErrorNote({ error }: { error: unknown }) {
  const { t } = useI18n();
  if (!error) return null;
  const message = error instanceof ApiError ? error.message : t('error.network');
  const fields = error instanceof ApiError && error.details ? Object.entries(error.details) : [];
  return (
    <div className="error" role="alert">
      <p>{message}</p>
      {fields.length > 0 && (
        <ul>
          {fields.map(([field, messages]) => (
            <li key={field}>
              <code>{field}</code>: {Array.isArray(messages) ? messages.join('; ') : String(messages)}
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

export function Notice({ children }: { children: ReactNode }) {
  return (
    <p className="notice" role="status">
      {children}
    </p>
  );
}

/** A labelled control: the label names it (`for`), the hint describes it (`aria-describedby`). */
export function Field({ label, children, hint }: { label: string; children: ReactElement; hint?: string }) {
  const id = useId();
  const control = cloneElement(children as ReactElement<{ id?: string; 'aria-describedby'?: string }>, {
    id,
    ...(hint ? { 'aria-describedby': `${id}-hint` } : {}),
  });
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      {control}
      {hint && <small id={`${id}-hint`}>{hint}</small>}
    </div>
  );
}

export function Section({
  title,
  children,
  actions,
}: {
  title: string;
  children: ReactNode;
  actions?: ReactNode;
}) {
  const id = useId();
  return (
    <section aria-labelledby={id} className="card">
      <div className="card-head">
        <h2 id={id}>{title}</h2>
        {actions}
      </div>
      {children}
    </section>
  );
}

export function Pager({
  page,
  lastPage,
  onPage,
}: {
  page: number;
  lastPage: number;
  onPage(page: number): void;
}) {
  const { t, n } = useI18n();
  if (lastPage <= 1) return null;
  return (
    <nav className="pager" aria-label={t('pager.label')}>
      <button type="button" disabled={page <= 1} onClick={() => onPage(page - 1)}>
        {t('pager.previous')}
      </button>
      <span>{t('pager.of', { page: n(page), last: n(lastPage) })}</span>
      <button type="button" disabled={page >= lastPage} onClick={() => onPage(page + 1)}>
        {t('pager.next')}
      </button>
    </nav>
  );
}

/** A status word from the API, translated where there is a translation, shown as it came otherwise. */
export function Badge({ value }: { value: string }) {
  const { t } = useI18n();
  // A status the strings do not know is shown as the API wrote it.
  return <span className={`badge badge-${value}`}>{t(`status.${value}` as Key) || value}</span>;
}

export function Loading() {
  const { t } = useI18n();
  return (
    <p className="muted" role="status">
      {t('loading')}
    </p>
  );
}

export function Empty({ children }: { children: ReactNode }) {
  return <p className="muted">{children}</p>;
}

/**
 * A table in a region that scrolls sideways when it is wider than the screen. `stacked`: on a narrow screen each
 * row is a block instead, each cell under its own heading (the cells' `data-label`), so a row's buttons stay in
 * view without scrolling.
 */
export function Table({
  head,
  children,
  caption,
  stacked = false,
}: {
  head: ReactNode[];
  children: ReactNode;
  caption: string;
  stacked?: boolean;
}) {
  return (
    <div
      className={stacked ? 'table-wrap stacked' : 'table-wrap'}
      tabIndex={0}
      role="region"
      aria-label={caption}
    >
      <table>
        <caption className="sr-only">{caption}</caption>
        <thead>
          <tr>
            {head.map((cell, i) => (
              <th key={i} scope="col">
                {cell}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>{children}</tbody>
      </table>
    </div>
  );
}
