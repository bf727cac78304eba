/** A route of the API: its method and path template (`/v1/links/:id`). */
export interface RouteMethod {
  readonly method: string
  readonly template: string
}

/** The routes the system middleware serves besides HttpApi's. */
const SYSTEM_ROUTES: ReadonlyArray<RouteMethod> = [
  { method: "GET", template: "/healthz" },
  { method: "GET", template: "/readyz" },
  { method: "GET", template: "/v1/openapi.json" }
]

const ORDER = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

/**
 * The methods a path of the API takes (for 405 and its Allow header): empty for a path no
 * route has. GET routes take HEAD too.
 */
export const makeAllowedMethods = (routes: ReadonlyArray<RouteMethod>) => {
  const compiled = [...routes, ...SYSTEM_ROUTES].map((r) => ({
    method: r.method.toUpperCase(),
    pattern: new RegExp(
      `^${r.template
        .split("/")
        .map((segment) => (segment.startsWith(":") ? "[^/]+" : escapeRegExp(segment)))
        .join("/")}$`
    )
  }))
  return (path: string): ReadonlyArray<string> => {
    const methods = new Set(compiled.filter((r) => r.pattern.test(path)).map((r) => r.method))
    if (methods.has("GET")) methods.add("HEAD")
    return [...methods].sort((a, b) => ORDER.indexOf(a) - ORDER.indexOf(b))
  }
}
