ALTER TABLE `blockers` ADD `holder_file` text;--> statement-breakpoint
ALTER TABLE `file_contentions` ADD `holder_file` text;