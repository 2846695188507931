/** A git provider's file, read at the last good commit the server fetched. */
export interface GitEnvconfigFile {
  text: string;
  commit: string;
  /** The repository URL, credentials removed. */
  repository: string;
  ref: string;
}

/**
 * A git provider as the core sees it (the fetching is an adapter's, src/net/git-envconfig-source.ts):
 * reads one file at one commit; undefined when the commit has none; hostile content throws.
 */
export interface GitEnvconfigSource {
  read(path: string): Promise<GitEnvconfigFile | undefined>;
}
