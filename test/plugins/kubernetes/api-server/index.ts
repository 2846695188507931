export { TestApiServer, tutorialRole, clusterAdmin, type RbacRule, type TokenInfo, type TestApiServerOptions, type RecordedRequest } from "./server.js";
