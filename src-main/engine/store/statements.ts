import type { Database, RunResult, Statement } from 'better-sqlite3'

/**
 * The engine's prepared statements: each SQL text prepared once (the hot paths run at prepared
 * speed), rows read as objects of one fixed shape, and inserts bound by position. Knows nothing
 * of transactions: the engine's context asks the transaction unit first (engine/store/transaction.ts).
 */

/** Builds a row object from a raw row (an array of column values). */
type RowBuilder = (values: unknown[]) => unknown

/**
 * A row builder for these column names: one object literal with every column. better-sqlite3
 * builds a row object by adding its columns one by one, and V8 turns an object with that many
 * added properties (a job has 35) into a slow dictionary: reading the row costs ~3× more, and so
 * does every later spread or property read of it. A literal gets a fixed shape. The names are
 * SQLite's column names of the engine's own SQL, quoted with JSON.stringify.
 */
function rowBuilder(names: string[]): RowBuilder {
  const fields = names.map((name, i) => `${JSON.stringify(name)}: values[${i}]`).join(', ')
  return new Function('values', `return { ${fields} }`) as RowBuilder
}

type Inserter = (row: object) => RunResult

/**
 * Inserts a row's `columns` with positional parameters read straight off the row: binding by
 * name looks each parameter up on the object, which for a wide row costs more than the insert.
 */
function inserter(statement: Statement, columns: readonly string[]): Inserter {
  const args = columns.map((column) => `row[${JSON.stringify(column)}]`).join(', ')
  return new Function('statement', `return (row) => statement.run(${args})`)(statement) as Inserter
}

export class Statements {
  private readonly statements = new Map<string, Statement>()
  private readonly builders = new Map<Statement, RowBuilder>()
  private readonly inserters = new Map<readonly string[], Inserter>()

  constructor(private readonly db: Database) {}

  /** The statement for `sql`, prepared on first use. */
  get<Row = unknown>(sql: string): Statement<unknown[], Row> {
    let statement = this.statements.get(sql)
    if (!statement) {
      statement = this.db.prepare(sql)
      this.statements.set(sql, statement)
    }
    return statement as Statement<unknown[], Row>
  }

  /** A statement that returns rows as arrays, with the builder that makes them objects. */
  private reader(sql: string): { statement: Statement<unknown[], unknown[]>; build: RowBuilder } {
    const statement = this.get(sql)
    let build = this.builders.get(statement)
    if (!build) {
      statement.raw(true)
      build = rowBuilder(statement.columns().map((column) => column.name))
      this.builders.set(statement, build)
    }
    return { statement: statement as Statement<unknown[], unknown[]>, build }
  }

  one<Row>(sql: string, params: unknown[]): Row | undefined {
    const { statement, build } = this.reader(sql)
    const values = statement.get(...params)
    return values === undefined ? undefined : (build(values) as Row)
  }

  all<Row>(sql: string, params: unknown[]): Row[] {
    const { statement, build } = this.reader(sql)
    return statement.all(...params).map((values) => build(values) as Row)
  }

  /**
   * Inserts `row` into `table`, its `columns` only. `columns` is the caller's constant: the
   * statement is prepared once per such list.
   */
  insert(table: string, columns: readonly string[], row: object): RunResult {
    let insert = this.inserters.get(columns)
    if (!insert) {
      const sql = `INSERT INTO ${table} (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')})`
      insert = inserter(this.get(sql), columns)
      this.inserters.set(columns, insert)
    }
    return insert(row)
  }
}
