import { QueryClient, QueryClientProvider, useQuery, useQueryClient } from '@tanstack/react-query';
import { type ReactElement, StrictMode, useEffect, useState } from 'react';
import { createRoot } from 'react-dom/client';
import { Link, Redirect, Route, Router, Switch, useLocation } from 'wouter';
import { api, liveEvents, session, whenSignedOut } from './api.ts';
import { I18nProvider, type Lang, useI18n } from './i18n.tsx';
import { type Me, MeContext, type Role } from './me.ts';
import { keys, queries, useWorkspace } from './queries.ts';
import { Campaigns, CampaignPage } from './screens/campaigns.tsx';
import { Compose } from './screens/compose.tsx';
import { BoothBoard } from './screens/booth.tsx';
import { FieldHome, PollDayMarking, WalkList } from './screens/field.tsx';
import { clearDevice, flush } from './field-store.ts';
import { SurveyBuilder } from './screens/survey-builder.tsx';
import { SurveyPage } from './screens/survey-page.tsx';
import { Surveys } from './screens/surveys.tsx';
import { Consent } from './screens/consent.tsx';
import { Privacy } from './screens/privacy.tsx';
import { Dashboard } from './screens/dashboard.tsx';
import { Grievances } from './screens/grievances.tsx';
import { Inbox } from './screens/inbox.tsx';
import { Imports } from './screens/imports.tsx';
import { Places } from './screens/places.tsx';
import { Profile } from './screens/profile.tsx';
import { Settings } from './screens/settings.tsx';
import { SignIn } from './screens/signin.tsx';
import { Team } from './screens/team.tsx';
import { VoterPage } from './screens/voter-page.tsx';
import { Voters } from './screens/voters.tsx';
import type { Key } from './strings.ts';
import { ErrorNote, Loading } from './ui.tsx';
import './styles.css';

const queryClient = new QueryClient({
  defaultOptions: { queries: { retry: false, refetchOnWindowFocus: false, staleTime: 5_000 } },
});

/** The screens each role reaches (the API enforces the same; this only hides what would answer 403). */
const nav: Array<{ path: string; key: Key; roles: Role[] }> = [
  { path: '/', key: 'nav.dashboard', roles: ['politician', 'manager'] },
  { path: '/inbox', key: 'nav.inbox', roles: ['politician', 'manager', 'volunteer'] },
  { path: '/voters', key: 'nav.voters', roles: ['politician', 'manager', 'volunteer'] },
  { path: '/field', key: 'nav.field', roles: ['politician', 'manager', 'volunteer'] },
  { path: '/booth', key: 'nav.booth', roles: ['politician', 'manager'] },
  { path: '/imports', key: 'nav.imports', roles: ['politician', 'manager'] },
  { path: '/campaigns', key: 'nav.campaigns', roles: ['politician', 'manager'] },
  { path: '/surveys', key: 'nav.surveys', roles: ['politician', 'manager'] },
  { path: '/grievances', key: 'nav.grievances', roles: ['politician', 'manager'] },
  { path: '/consent', key: 'nav.consent', roles: ['politician', 'manager'] },
  { path: '/privacy', key: 'nav.privacy', roles: ['politician', 'manager'] },
  { path: '/places', key: 'nav.places', roles: ['politician', 'manager'] },
  { path: '/team', key: 'nav.team', roles: ['politician'] },
  { path: '/settings', key: 'nav.settings', roles: ['politician'] },
  { path: '/profile', key: 'nav.profile', roles: ['politician', 'manager', 'volunteer'] },
];

function LanguageSwitch() {
  const { lang, setLang, t } = useI18n();
  return (
    <label className="lang">
      <span className="sr-only">{t('lang.label')}</span>
      <select value={lang} onChange={(e) => setLang(e.target.value as Lang)} aria-label={t('lang.label')}>
        <option value="en">English</option>
        <option value="hi">हिन्दी</option>
      </select>
    </label>
  );
}

function Shell({ me }: { me: Me }) {
  const { t } = useI18n();
  const client = useQueryClient();
  // New messages and conversation changes arrive without reloading: the stream marks what they touch as stale.
  useEffect(
    () =>
      liveEvents((type) => {
        if (type.startsWith('conversation.') || type.startsWith('message.')) {
          void client.invalidateQueries({ queryKey: keys.conversations });
          void client.invalidateQueries({ queryKey: keys.conversation });
        }
      }),
    [client],
  );
  return (
    <MeContext.Provider value={me}>
      <a className="skip" href="#main">
        {t('skip')}
      </a>
      <TopBar me={me} />
      <main id="main" tabIndex={-1}>
        <Screens me={me} />
      </main>
    </MeContext.Provider>
  );
}

/** The brand, the navigation of the screens the role may see (behind Menu on a narrow screen), who is signed in. */
function TopBar({ me }: { me: Me }) {
  const { t } = useI18n();
  const [location] = useLocation();
  const client = useQueryClient();
  // On a narrow screen the navigation folds behind a Menu button; it folds again on every move.
  const [menuOpen, setMenuOpen] = useState(false);
  useEffect(() => setMenuOpen(false), [location]);
  const signOut = async () => {
    await api.POST('/api/auth/logout').catch(() => undefined);
    // Everything the device holds goes with the session: walk lists, the queue, the cached profile.
    await flush().catch(() => undefined);
    await clearDevice().catch(() => undefined);
    session.clear();
    client.clear();
    window.location.assign('/console/signin');
  };
  return (
    <header className="top">
      <strong className="brand">{t('app.name')}</strong>
      <button
        type="button"
        className="menu-toggle"
        aria-expanded={menuOpen}
        aria-controls="top-menu"
        onClick={() => setMenuOpen(!menuOpen)}
      >
        {t('menu')}
      </button>
      <div id="top-menu" className={menuOpen ? 'menu open' : 'menu'}>
        <nav aria-label={t('nav.label')}>
          <ul>
            {nav
              .filter((item) => item.roles.includes(me.user.role))
              .map((item) => {
                const current =
                  item.path === '/'
                    ? location === '/'
                    : location === item.path || location.startsWith(`${item.path}/`);
                return (
                  <li key={item.path}>
                    <Link href={item.path} aria-current={current ? 'page' : undefined}>
                      {t(item.key)}
                    </Link>
                  </li>
                );
              })}
          </ul>
        </nav>
        <div className="who">
          <span>
            {me.user.name} · {t(`role.${me.user.role}`)}
          </span>
          <LanguageSwitch />
          <button type="button" onClick={() => void signOut()}>
            {t('signout')}
          </button>
        </div>
      </div>
    </header>
  );
}

/** The screens, each where the role may see it. */
/** The screens that are one component at one path, each behind the navigation entry that gates it. */
const plainScreens: Array<{ path: string; gate: string; Screen: () => ReactElement }> = [
  { path: '/booth', gate: '/booth', Screen: BoothBoard },
  { path: '/imports', gate: '/imports', Screen: Imports },
  { path: '/campaigns', gate: '/campaigns', Screen: Campaigns },
  { path: '/campaigns/new', gate: '/campaigns', Screen: Compose },
  { path: '/surveys', gate: '/surveys', Screen: Surveys },
  { path: '/surveys/new', gate: '/surveys', Screen: SurveyBuilder },
  { path: '/grievances', gate: '/grievances', Screen: Grievances },
  { path: '/consent', gate: '/consent', Screen: Consent },
  { path: '/privacy', gate: '/privacy', Screen: Privacy },
  { path: '/places', gate: '/places', Screen: Places },
  { path: '/team', gate: '/team', Screen: Team },
  { path: '/settings', gate: '/settings', Screen: Settings },
];

/** The screens, each where the role may see it. */
function Screens({ me }: { me: Me }) {
  const { t } = useI18n();
  const allowed = (path: string) =>
    nav.some((item) => item.path === path && item.roles.includes(me.user.role));
  const home = me.user.role === 'volunteer' ? '/inbox' : '/';
  return (
    <Switch>
      <Route path="/">{allowed('/') ? <Dashboard /> : <Redirect to={home} />}</Route>
      <Route path="/inbox/:id?">{(p) => <Inbox id={p.id} />}</Route>
      <Route path="/voters">
        <Voters />
      </Route>
      <Route path="/voters/:id">{(p) => <VoterPage id={Number(p.id)} />}</Route>
      <Route path="/field">
        <FieldHome />
      </Route>
      <Route path="/field/:turf">{(p) => <WalkList turfId={p.turf} />}</Route>
      <Route path="/field/:turf/poll-day">{(p) => <PollDayMarking turfId={p.turf} />}</Route>
      {plainScreens
        .filter((screen) => allowed(screen.gate))
        .map(({ path, Screen }) => (
          <Route key={path} path={path}>
            <Screen />
          </Route>
        ))}
      {allowed('/campaigns') && <Route path="/campaigns/:id">{(p) => <CampaignPage id={p.id} />}</Route>}
      {allowed('/surveys') && <Route path="/surveys/:id">{(p) => <SurveyPage id={p.id} />}</Route>}
      <Route path="/profile">
        <Profile />
      </Route>
      <Route>
        <section className="card">
          <h1>{t('notfound.title')}</h1>
          <p>{t('notfound.text')}</p>
          <Link href={home}>{t('notfound.home')}</Link>
        </section>
      </Route>
    </Switch>
  );
}

function App() {
  const { t, setZone } = useI18n();
  const [token, setToken] = useState(session.token());
  useEffect(
    () =>
      whenSignedOut(() => {
        void clearDevice().catch(() => undefined);
        setToken(null);
      }),
    [],
  );
  const me = useQuery({ ...queries.me(), enabled: token !== null });
  // The workspace's zone: every time the console shows is in it.
  const workspace = useWorkspace(token !== null);
  const zone = workspace.data?.timezone;
  useEffect(() => setZone(zone), [zone, setZone]);
  if (token === null)
    return (
      <Switch>
        <Route path="/signin">
          <SignIn onSignedIn={(next) => setToken(next)} />
        </Route>
        <Route>
          <Redirect to="/signin" replace />
        </Route>
      </Switch>
    );
  if (me.isPending) return <Loading />;
  // The service did not answer (a 401 signs out instead): say so, with a way to try again.
  if (!me.data)
    return (
      <main id="main" className="card">
        <h1>{t('app.name')}</h1>
        <ErrorNote error={me.error} />
        <button type="button" className="primary" onClick={() => void me.refetch()}>
          {t('error.retry')}
        </button>
      </main>
    );
  return (
    <Switch>
      <Route path="/signin">
        <Redirect to="/" replace />
      </Route>
      <Route>
        <Shell me={me.data as Me} />
      </Route>
    </Switch>
  );
}

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <I18nProvider>
      <QueryClientProvider client={queryClient}>
        <Router base="/console">
          <App />
        </Router>
      </QueryClientProvider>
    </I18nProvider>
  </StrictMode>,
);

// The app shell kept for the field screens without the network (public/sw.js); the API is never cached.
if ('serviceWorker' in navigator && window.isSecureContext)
  void navigator.serviceWorker.register('/console/sw.js', { scope: '/console/' }).catch(() => undefined);
