import { useMutation } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { api, envelope, session } from '../api.ts';
import { useI18n } from '../i18n.tsx';
import { ErrorNote, Field, Notice } from '../ui.tsx';

type Mode = 'password' | 'otp' | 'register';

/** Sign-in with email and password or with a code sent by SMS; a new office creates its workspace here. */
/** What the sign-in forms hold: kept while switching between them. */
interface Credentials {
  email: string;
  password: string;
  phone: string;
  code: string;
  name: string;
}

interface FormProps {
  form: Credentials;
  set: (key: keyof Credentials, value: string) => void;
  /** Signed in with this token. */
  done: (token: string) => void;
}

const submit = (e: FormEvent, action: () => void) => {
  e.preventDefault();
  action();
};

export function SignIn({ onSignedIn }: { onSignedIn(token: string): void }) {
  const { t, lang, setLang } = useI18n();
  const [mode, setMode] = useState<Mode>('password');
  const [form, setForm] = useState<Credentials>({ email: '', password: '', phone: '', code: '', name: '' });
  const set = (key: keyof Credentials, value: string) => setForm((f) => ({ ...f, [key]: value }));
  const done = (token: string) => {
    session.set(token);
    onSignedIn(token);
  };
  const props = { form, set, done };
  return (
    <main id="main" className="signin">
      <div className="card">
        <div className="card-head">
          <h1>{t('app.name')}</h1>
          <select
            value={lang}
            onChange={(e) => setLang(e.target.value as 'en' | 'hi')}
            aria-label={t('lang.label')}
          >
            <option value="en">English</option>
            <option value="hi">हिन्दी</option>
          </select>
        </div>
        <div className="tabs" role="group" aria-label={t('signin.how')}>
          {(['password', 'otp', 'register'] as const).map((m) => (
            <button key={m} type="button" aria-pressed={mode === m} onClick={() => setMode(m)}>
              {t(`signin.mode.${m}`)}
            </button>
          ))}
        </div>
        {mode === 'password' && <PasswordForm {...props} />}
        {mode === 'otp' && <CodeForm {...props} />}
        {mode === 'register' && <RegisterForm {...props} />}
      </div>
    </main>
  );
}

function PasswordForm({ form, set, done }: FormProps) {
  const { t } = useI18n();
  const login = useMutation({
    mutationFn: () =>
      envelope(api.POST('/api/auth/login', { body: { email: form.email, password: form.password } })),
    onSuccess: (res) => done(res.data.access_token),
  });
  return (
    <form onSubmit={(e) => submit(e, () => login.mutate())}>
      <Field label={t('field.email')}>
        <input
          type="email"
          autoComplete="username"
          required
          value={form.email}
          onChange={(e) => set('email', e.target.value)}
        />
      </Field>
      <Field label={t('field.password')}>
        <input
          type="password"
          autoComplete="current-password"
          required
          value={form.password}
          onChange={(e) => set('password', e.target.value)}
        />
      </Field>
      <ErrorNote error={login.error} />
      <button className="primary" disabled={login.isPending}>
        {t('signin.submit')}
      </button>
    </form>
  );
}

/** A code sent by SMS to the phone, then typed back. */
function CodeForm({ form, set, done }: FormProps) {
  const { t } = useI18n();
  const [codeSent, setCodeSent] = useState(false);
  const sendCode = useMutation({
    mutationFn: () => envelope(api.POST('/api/auth/send-otp', { body: { phone: form.phone } })),
    onSuccess: () => setCodeSent(true),
  });
  const verify = useMutation({
    mutationFn: () =>
      envelope(api.POST('/api/auth/verify-otp', { body: { phone: form.phone, otp: form.code } })),
    onSuccess: (res) => done(res.data.access_token),
  });
  return (
    <form onSubmit={(e) => submit(e, () => (codeSent ? verify.mutate() : sendCode.mutate()))}>
      <Field label={t('field.phone')} hint={t('signin.phone.hint')}>
        <input
          type="tel"
          autoComplete="tel"
          required
          value={form.phone}
          onChange={(e) => set('phone', e.target.value)}
        />
      </Field>
      {codeSent && (
        <>
          <Notice>{t('signin.code.sent')}</Notice>
          <Field label={t('signin.code')}>
            <input
              inputMode="numeric"
              autoComplete="one-time-code"
              pattern="[0-9]{6}"
              required
              value={form.code}
              onChange={(e) => set('code', e.target.value)}
            />
          </Field>
        </>
      )}
      <ErrorNote error={sendCode.error ?? verify.error} />
      <button className="primary" disabled={sendCode.isPending || verify.isPending}>
        {codeSent ? t('signin.submit') : t('signin.code.send')}
      </button>
      {codeSent && (
        <button type="button" onClick={() => sendCode.mutate()}>
          {t('signin.code.again')}
        </button>
      )}
    </form>
  );
}

/** A new office: its workspace and its first user (a politician). */
function RegisterForm({ form, set, done }: FormProps) {
  const { t } = useI18n();
  const register = useMutation({
    mutationFn: () =>
      envelope(
        api.POST('/api/auth/register', {
          body: {
            name: form.name,
            email: form.email,
            password: form.password,
            ...(form.phone ? { phone: form.phone } : {}),
          },
        }),
      ),
    onSuccess: (res) => done(res.data.access_token),
  });
  return (
    <form onSubmit={(e) => submit(e, () => register.mutate())}>
      <p className="muted">{t('register.intro')}</p>
      <Field label={t('field.name')}>
        <input autoComplete="name" required value={form.name} onChange={(e) => set('name', e.target.value)} />
      </Field>
      <Field label={t('field.email')}>
        <input
          type="email"
          autoComplete="email"
          required
          value={form.email}
          onChange={(e) => set('email', e.target.value)}
        />
      </Field>
      <Field label={t('field.password')} hint={t('register.password.hint')}>
        <input
          type="password"
          autoComplete="new-password"
          required
          value={form.password}
          onChange={(e) => set('password', e.target.value)}
        />
      </Field>
      <Field label={t('field.phone.optional')}>
        <input
          type="tel"
          autoComplete="tel"
          value={form.phone}
          onChange={(e) => set('phone', e.target.value)}
        />
      </Field>
      <ErrorNote error={register.error} />
      <button className="primary" disabled={register.isPending}>
        {t('register.submit')}
      </button>
    </form>
  );
}
