/** SQLite or PostgreSQL backends (`@mediagate/server/sql`); needs `@mediagate/store-sql` installed. */
export * as SqlBackends from "./SqlBackends.js"
