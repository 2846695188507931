import type { Api, Me } from "./api.js";

/** The signed-in caller and the API client every page uses. */
export interface Session {
  api: Api;
  me: Me;
}
