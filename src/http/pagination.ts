export interface PageRequest {
  page: number;
  limit: number;
}

export interface PageResult<T> {
  data: T[];
  total: number;
  page: number;
}

export function pageRequest(query: { page?: number; limit?: number }): PageRequest {
  return { page: query.page ?? 1, limit: query.limit ?? 20 };
}
