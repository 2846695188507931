import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { Api, forgetToken, reach, saveToken, savedToken, signInProvider, type Me } from "./api.js";
import type { Session } from "./session.js";
import { useHashRoute } from "./hooks.js";
import { AuditPage } from "./pages/audit.js";
import { DeployPage } from "./pages/deploy.js";
import { DeploysPage } from "./pages/deploys.js";
import { HistoryPage } from "./pages/history.js";
import { OverviewPage } from "./pages/overview.js";
import { PluginsPage } from "./pages/plugins.js";
import { ReleasePage } from "./pages/release.js";
import { ReleasesPage } from "./pages/releases.js";

function SignIn({ onSignedIn }: { onSignedIn: (s: Session) => void }) {
  const [token, setToken] = useState("");
  const [error, setError] = useState<string>();
  // undefined while asking the server; null when it has no provider to sign in with.
  const [provider, setProvider] = useState<{ name: string } | null>();
  useEffect(
    () =>
      void signInProvider().then(
        (p) => setProvider(p ?? null),
        () => setProvider(null),
      ),
    [],
  );
  const submit = async (e: Event): Promise<void> => {
    e.preventDefault();
    const api = new Api(token.trim());
    try {
      const me = await api.call<Me>("GET", "/api/v1/whoami");
      saveToken(token.trim());
      onSignedIn({ api, me });
    } catch (err) {
      setError((err as Error).message);
    }
  };
  const form = (
    <form onSubmit={(e) => void submit(e)}>
      <label for="token">API token</label>
      <input
        id="token"
        name="token"
        type="password"
        autocomplete="current-password"
        value={token}
        onInput={(e) => setToken(e.currentTarget.value)}
        required
      />
      <p class="hint">Kept in this tab only (session storage).</p>
      <button type="submit">Sign in</button>
      <p class="error" role="alert">
        {error ?? ""}
      </p>
    </form>
  );
  return (
    <main class="signin">
      <h1>manent</h1>
      {provider === undefined ? (
        <p aria-busy="true">Loading…</p>
      ) : provider ? (
        <>
          {/* A plain link: the browser goes to the provider and comes back with the session cookie. */}
          <p>
            <a class="button" href={`/auth/login?return_to=${encodeURIComponent("/")}`}>
              Sign in with {provider.name}
            </a>
          </p>
          {/* People sign in with the provider; an API token (automation, break-glass) stays one click away. */}
          <details>
            <summary>Sign in with an API token instead</summary>
            {form}
          </details>
        </>
      ) : (
        form
      )}
    </main>
  );
}

function App() {
  const [session, setSession] = useState<Session>();
  const [checking, setChecking] = useState(true);
  const route = useHashRoute();
  useEffect(() => {
    // A token of this tab, else the provider's session (its cookie), else the sign-in page.
    const token = savedToken();
    const api = new Api(token);
    api.call<Me>("GET", "/api/v1/whoami").then(
      (me) => (setSession({ api, me }), setChecking(false)),
      () => (token !== null && forgetToken(), setChecking(false)),
    );
  }, []);
  const signOut = async (): Promise<void> => {
    if (session?.api.token === null) await session.api.call("POST", "/auth/logout").catch(() => undefined);
    forgetToken();
    setSession(undefined);
  };
  if (checking) return <main aria-busy="true" />;
  if (!session) return <SignIn onSignedIn={setSession} />;
  const [page = "overview", ...rest] = route;
  const current = (name: string) => (page === name ? "page" : undefined);
  return (
    <>
      <header>
        <nav aria-label="main">
          <a class="brand" href="#/">
            manent
          </a>
          <a href="#/" aria-current={current("overview")}>
            Overview
          </a>
          <a href="#/deploys" aria-current={current("deploys")}>
            Deploys
          </a>
          <a href="#/releases" aria-current={current("releases")}>
            Releases
          </a>
          <a href="#/plugins" aria-current={current("plugins")}>
            Plugins
          </a>
          <a href="#/audit" aria-current={current("audit")}>
            Audit
          </a>
          {session.me.kind === "anonymous" ? (
            // An open API (no way to sign in configured, loopback only): nobody to sign out.
            <span class="who">open API, no sign-in configured</span>
          ) : (
            <>
              <span class="who">
                {session.me.name} · {reach(session.me)}
              </span>
              <button class="link" onClick={() => void signOut()}>
                Sign out
              </button>
            </>
          )}
        </nav>
      </header>
      <main>
        {page === "deploys" && rest[0] ? (
          // Keyed by id: another deploy is a new page, never the previous one's state under the new URL.
          <DeployPage key={rest[0]} session={session} id={rest[0]} />
        ) : page === "history" && rest.length === 4 ? (
          <HistoryPage
            key={rest.join("/")}
            session={session}
            tenant={rest[0]!}
            application={rest[1]!}
            artifact={rest[2]!}
            environment={rest[3]!}
          />
        ) : page === "releases" && rest[0] ? (
          <ReleasePage key={rest[0]} session={session} id={rest[0]} />
        ) : page === "releases" ? (
          <ReleasesPage session={session} />
        ) : page === "plugins" ? (
          <PluginsPage session={session} />
        ) : page === "audit" ? (
          <AuditPage session={session} />
        ) : page === "deploys" ? (
          <DeploysPage session={session} />
        ) : (
          <OverviewPage session={session} />
        )}
      </main>
    </>
  );
}

render(<App />, document.getElementById("app")!);
